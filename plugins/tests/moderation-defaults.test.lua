-- The shipped default rule set of plugins/moderation.lua (no `rules` given: the plugin's defaults, the same
-- as hookbot.toml's): what each default rule stops, and a lively group at human pace for 20 virtual
-- minutes in which nobody ordinary is warned, muted or blocked. Run with `swift run hookbot test plugins/`.

local function msg(text, from, cid) return { message = { text = text, from = from or "Tom", cid = cid or "c1" } } end

local function allowed(text, from, cid)
  local s = msg(text, from, cid)
  s.expect = { verdict = "allow", actions = {}, replies = {} }
  return s
end

-- A small deterministic generator (a 32-bit LCG), so every run is the same.
local function rng(seed)
  local state = seed
  return function(n)
    state = (state * 1103515245 + 12345) % 2147483648
    return state % n + 1
  end
end

local ENGLISH = {
  "morning all", "anyone tried the new build?", "lol", "that's exactly what I said yesterday", "brb coffee",
  "ok", "+1", "sounds good to me", "who's in for lunch at 12:30?", "I'll push the fix tonight",
  "did you see the game last night?", "wait what", "haha no way", "thanks!", "can someone review my PR?",
  "meeting moved to 3pm", "yes", "no idea tbh", "the deploy went fine", "it works on my machine",
  "I think the cache is stale", "let me check", "back", "nice one", "agreed", "hmm not sure about that",
  "see you tomorrow", "great talk today", "is the wifi down again?", "I'm a bit late, sorry",
  "we should write this down somewhere", "who broke the tests?", "a quick question about the release",
  "I can take that one", "so a new version is out", "is it me or is it slow", "ship it", "same here",
  "good point", "oh I see", "NASA just posted the launch video", "the API returns 404 for /v2/users",
  "my cat knocked the coffee over again", "Scunthorpe won 2-1 last night", "the assassin's creed sale is on",
  "cocktails after work?", "I need to analyse the logs first", "does anyone have the Wi-Fi password for the guests?",
  "happy birthday Jerry!", "OMG that's great news", "BRB", "TIL you can pipe into jq -r",
  "the class is called AbstractFactoryBuilder, of course", "run `make test` before you push",
}
local CHINESE = {
  "大家好", "今天天气不错", "我马上到", "这个链接看看", "哈哈哈哈", "晚上一起吃饭吗？", "收到，谢谢！", "周末有空吗",
  "这个问题我也遇到过", "好的没问题", "早上好", "辛苦了", "明天见", "我觉得可以", "等我一下", "太好了",
  "谁知道会议室在哪", "我在路上了", "刚看到消息", "这个版本好用多了", "发生了什么事？", "这个功能上线了吗",
}
local EMOJI = { "😂", "👍", "🎉🎉", "❤️", "🙏", "😅", "🔥🔥🔥", "🤔", "👀", "🙌", "😭", "✅", "☕️", "🍜", "🚀" }
local LINKS = {
  "https://github.com/apple/swift/pull/1234", "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
  "https://en.wikipedia.org/wiki/Moderation", "https://zh.wikipedia.org/wiki/上海",
  "https://www.bilibili.com/video/BV1xx411c7mD", "https://www.zhihu.com/question/20000000",
  "https://docs.swift.org/swift-book/", "https://news.ycombinator.com/item?id=1", "www.bbc.co.uk/news",
  "https://stackoverflow.com/questions/11227809", "https://maps.google.com/?q=cafe",
}

-- `n` members posting for `minutes` virtual minutes: bursts of 1-3 messages a few seconds apart, pauses of
-- 10-60 s, never more than 4 messages in 10 s, never the same line twice in a member's last 10 messages.
-- Three newcomers join after 5 minutes, say hello (the same words), chat without links for their first 10
-- minutes, and mention one member at a time.
local function lively(n, minutes)
  local pick = rng(20261125)
  local members = {}
  for i = 1, n do members[i] = (i % 3 == 0) and ("成员" .. i) or ("member_" .. i) end
  local posts = {}
  local function text(from, recent, newcomer, fresh)
    for _ = 1, 20 do
      local r, t = pick(100)
      if r <= 35 then
        t = pick(10) <= 3 and CHINESE[pick(#CHINESE)] or ENGLISH[pick(#ENGLISH)]
      elseif r <= 50 then
        t = ENGLISH[pick(#ENGLISH)] .. " " .. EMOJI[pick(#EMOJI)]
      elseif r <= 58 then
        t = EMOJI[pick(#EMOJI)] .. EMOJI[pick(#EMOJI)]
      elseif r <= 75 and not fresh then
        local k = pick(2)
        local l = {}
        for j = 1, k do l[j] = LINKS[pick(#LINKS)] end
        t = (pick(2) == 1 and (ENGLISH[pick(#ENGLISH)] .. " ") or "look: ") .. table.concat(l, " and ")
      else
        local k = newcomer and 1 or pick(3)
        local names = {}
        for j = 1, k do
          local other = members[pick(#members)]
          if other == from then other = members[(pick(#members) % #members) + 1] end
          names[j] = "@" .. other
        end
        t = table.concat(names, " ") .. " " .. (pick(10) <= 3 and CHINESE[pick(#CHINESE)] or ENGLISH[pick(#ENGLISH)])
      end
      local seen = false
      for _, p in ipairs(recent) do if p == t then seen = true end end
      if not seen then
        table.insert(recent, t)
        if #recent > 10 then table.remove(recent, 1) end
        return t
      end
    end
    return "hm " .. pick(100000)
  end
  local function schedule(from, start, newcomer)
    local t, times, recent = start, {}, {}
    while t < minutes * 60 do
      for _ = 1, pick(3) do
        if #times >= 4 and t - times[#times - 3] < 10 then t = times[#times - 3] + 10.5 end
        if t >= minutes * 60 then break end
        times[#times + 1] = t
        posts[#posts + 1] = { t = t, from = from, text = text(from, recent, newcomer, newcomer and t - start < 600) }
        t = t + 1 + pick(30) / 10
      end
      t = t + 10 + pick(50)
    end
  end
  for i, m in ipairs(members) do schedule(m, pick(20), false) end
  local newcomers = { "newbie_a", "newbie_b", "小新" }
  for i, m in ipairs(newcomers) do
    posts[#posts + 1] = { t = 300 + i, join = m }
    posts[#posts + 1] = { t = 310 + i * 5, from = m, text = "hi everyone, I'm new here 👋" }
    schedule(m, 330 + i * 7, true)
  end
  table.sort(posts, function(a, b) if a.t ~= b.t then return a.t < b.t end return (a.from or a.join) < (b.from or b.join) end)
  local steps, now = {}, 0
  for _, p in ipairs(posts) do
    if p.t > now then steps[#steps + 1] = { advance = p.t - now }; now = p.t end
    if p.join then
      steps[#steps + 1] = { join = { cid = "lobby", members = { p.join }, by = p.join } }
    else
      steps[#steps + 1] = { message = { text = p.text, from = p.from, cid = "lobby" },
                            expect = { verdict = "allow", actions = {}, replies = {} } }
    end
  end
  steps[#steps + 1] = { expect = { absent = { "hits:scam", "hits:profanity", "hits:repeats", "hits:caps",
    "hits:emoji-flood", "hits:zalgo", "hits:new-member-links", "hits:new-member-mentions", "hits:spam-wave" } } }
  return steps
end

return {
  plugins = { "moderation" },
  config = { moderators = { "Mod" } },
  cases = {
    {
      name = "scam: a scam phrase or a link to an IP logger is blocked with a strike and an alert",
      config = { modlog = "modlog" },
      steps = {
        { message = "FREE NITRO for everyone, claim it now", expect = { verdict = "block", reason = "that looks like a scam",
          actions = { { kind = "warn", user = "Tom", reason = "that looks like a scam" } },
          replies = { "@Tom that looks like a scam",
                      { cid = "modlog", match = "^block %+ warn %+ strike 1 Tom in c1 %(rule scam: preset scam: .*FREE NITRO" } } } },
        { message = { text = "see https://grabify.link/ABC123", from = "Jerry" },
          expect = { verdict = "block", reason = "that looks like a scam" } },
        allowed("the nitro cold brew at the cafe is great"),
      },
    },
    {
      name = "profanity: a warning, the message goes through",
      steps = {
        { message = "this build is shit", expect = { verdict = "allow", text = "this build is shit",
          actions = { { kind = "warn", reason = "please mind your language" } } } },
        allowed("I need to analyse the class of 2026 in Scunthorpe"),
      },
    },
    {
      name = "new members: no links for 10 minutes, at most 2 mentions for an hour; established members are free",
      steps = {
        { join = { cid = "c1", members = { "newbie" }, by = "newbie" } },
        { message = { text = "hi! my site https://example.org", from = "newbie" },
          expect = { verdict = "block", reason = "new members cannot post links yet", actions = {} } },
        { message = { text = "@Tom @Jerry @Spike hello", from = "newbie" },
          expect = { verdict = "block", reason = "new members cannot mention more than 2 people yet" } },
        allowed("@Jerry @Spike @Tyke @Butch look https://example.org"),
        -- Ten minutes later, and three ordinary messages after (new_members = {minutes = 10, messages = 3}).
        { advance = 601 },
        allowed("thanks for having me", "newbie"), allowed("I work on the docs team", "newbie"),
        { message = { text = "https://example.org is my blog", from = "newbie" },
          expect = { verdict = "block", reason = "new members cannot post links yet" } },
        allowed("nice to meet you all", "newbie"),
        allowed("now I can share https://example.org", "newbie"),
      },
    },
    {
      name = "repeats: the same long text three times in a minute",
      steps = {
        allowed("has anyone seen my blue umbrella?"), { advance = 5 }, allowed("has anyone seen my blue umbrella?"),
        { advance = 5 },
        { message = "has anyone seen my blue umbrella?", expect = { verdict = "block", reason = "please do not repeat yourself" } },
        { advance = 5 }, allowed("ok"), allowed("ok"), allowed("ok"),
      },
    },
    {
      name = "spam wave: new accounts posting copies of one message are stopped from the fifth copy",
      steps = (function()
        local steps = {}
        for i = 1, 6 do steps[#steps + 1] = { join = { cid = "c1", members = { "raider" .. i }, by = "raider" .. i } } end
        for i = 1, 4 do steps[#steps + 1] = allowed("come to our great new server", "raider" .. i) end
        for i = 5, 6 do
          steps[#steps + 1] = { message = { text = "come to our great new server", from = "raider" .. i },
            expect = { verdict = "block", reason = "this message is being posted by many new members" } }
        end
        steps[#steps + 1] = allowed("come to our great new server", "Tom") -- established: not counted
        return steps
      end)(),
    },
    {
      name = "caps (in dry run until a moderator turns it on), emoji floods and zalgo",
      steps = {
        allowed("OMG that's great news"), allowed("NASA and ESA launch today!"),
        -- caps ships in dry run: counted (and posted to the mod-log when there is one), nothing done
        allowed("WHY DOES NOBODY EVER ANSWER MY QUESTIONS"),
        { expect_state = { ["hits:caps"] = 1 } },
        { message = { text = "!mod dryrun caps off", from = "Mod" }, expect = { replies = { "rule caps: dry run off" } } },
        { message = "WHY DOES NOBODY EVER ANSWER MY QUESTIONS", expect = { verdict = "block", reason = "please do not write in capitals" } },
        { advance = 10 }, allowed("🎉🎉🎉🎂🎂 happy birthday!!! 🥳🥳"),
        { message = string.rep("😂", 31), expect = { verdict = "block", reason = "too many emoji" } },
        { message = "h" .. string.rep("\u{0301}\u{0316}\u{0334}\u{0350}", 6) .. "ello", expect = { verdict = "block", reason = "that text is unreadable" } },
      },
    },
    {
      name = "a lively group of 30 at human pace for 20 virtual minutes: nobody is warned, muted or blocked",
      steps = lively(30, 20),
    },
  },
}
