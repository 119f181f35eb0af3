-- Scenarios for the rules engine of plugins/moderation.lua: each trigger, each action, where rules apply,
-- dry run, escalation with decay, appeals and the !mod commands. Each case sets its own `rules` (replacing
-- the default set) so that it shows one thing; plugins/tests/moderation-defaults.test.lua runs the shipped
-- defaults. Run with `swift run hookbot test plugins/`.

local function msg(text, from, cid) return { message = { text = text, from = from or "Tom", cid = cid or "c1" } } end

-- One rule with the given trigger; `extra` adds fields (actions, message, ...).
local function rule(name, trigger, extra)
  local r = { name = name, trigger = trigger }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

local function allowed(text, from, cid)
  local s = msg(text, from, cid)
  s.expect = { verdict = "allow", actions = {}, replies = {} }
  return s
end

return {
  plugins = { "moderation" },
  config = {
    moderators = { "Mod" },
    flood = false, max_links = false, max_mentions = false,
    modlog = "modlog",
    rules = {},
  },
  cases = {
    -- Triggers --------------------------------------------------------------------------------------------
    {
      name = "keywords: a hit blocks with the rule's message, a strike warns, the mod-log says who, why and undo",
      config = { rules = { rule("money", { keywords = { "free money" } }, { message = "no get-rich-quick offers" }) } },
      steps = {
        allowed("money is tight this month"),
        { message = "FREE MONEY for everyone",
          expect = { verdict = "block", reason = "no get-rich-quick offers", code = 4301,
                     actions = { { kind = "warn", user = "Tom", reason = "no get-rich-quick offers" } },
                     replies = { { cid = "c1", text = "@Tom no get-rich-quick offers" },
                                 { cid = "modlog", match = "^block %+ warn %+ strike 1 Tom in c1 %(rule money: keyword 'FREE MONEY'%) by modbot — undo: !mod pardon Tom c1$" } } } },
        { expect_state = { ["hits:money"] = 1, ["conv:c1:strikes:Tom"] = { 1700000000 },
                           modlog = { { action = "block + warn + strike 1", target = "Tom", cid = "c1", rule = "money",
                                        by = "modbot", undo = "!mod pardon Tom c1", plugin = "moderation" } } } },
      },
    },
    {
      name = "keywords: wildcards, evasions and Chinese; the allow list keeps innocent words",
      config = { rules = { rule("words", { keywords = { "casino*", "scam", "骗子" }, allow = { "scampi" } },
        { actions = { "block" } }) } },
      steps = {
        { message = "best CASINOS online", expect = { verdict = "block",
          replies = { { cid = "modlog", contains = "(rule words: keyword 'CASINOS')" } } } },
        { message = "s c a m", expect = { verdict = "block" } },
        { message = "ｓｃａｍ", expect = { verdict = "block" } },
        { message = "你是骗子吗", expect = { verdict = "block" } },
        allowed("scampi for dinner?"), allowed("occasional wins at the card table"),
      },
    },
    {
      name = "regex: bounded regular expressions",
      config = { rules = { rule("tg", { regex = { [[\bt\.me/[A-Za-z0-9_]{5,}]] } }, { actions = { "block" } }) } },
      steps = {
        { message = "join t.me/cryptopumps now", expect = { verdict = "block",
          replies = { { cid = "modlog", contains = "(rule tg: regex 't.me/cryptopumps')" } } } },
        allowed("meet me at 5"), allowed("smart.me/abc"),
      },
    },
    {
      name = "presets: the shipped scam list, English and Chinese",
      config = { rules = { rule("scams", { presets = { "scam" } }, { actions = { "block" } }) } },
      steps = {
        { message = "Free Nitro for everyone!", expect = { verdict = "block",
          replies = { { cid = "modlog", contains = "(rule scams: preset scam: 'Free Nitro')" } } } },
        { message = "Double your Bitcoin in 24 hours", expect = { verdict = "block" } },
        allowed("is this message a scam or not?"), allowed("I bought a steam gift card for my brother"),
      },
    },
    {
      name = "links: a denied domain (and its subdomains) fires, others pass",
      config = { rules = { rule("shorteners", { links = { deny = { "bit.ly", "tinyurl.com" } } }, { actions = { "block" } }) } },
      steps = {
        allowed("the docs: https://github.com/apple/swift and https://docs.swift.org/"),
        { message = "click https://bit.ly/3xYz now", expect = { verdict = "block", actions = {},
          replies = { { cid = "modlog", contains = "(rule shorteners: link to bit.ly)" } } } },
        { message = "or https://go.tinyurl.com/abc", expect = { verdict = "block" } },
        allowed("notbit.ly is not the same site: https://notbit.ly/x"),
      },
    },
    {
      name = "links: an allow list refuses every other domain",
      config = { rules = { rule("only-ours", { links = { allow = { "example.org" } } }, { actions = { "block" } }) } },
      steps = {
        allowed("see https://example.org/a and https://docs.example.org/b"),
        { message = "see https://github.com/x", expect = { verdict = "block",
          replies = { { cid = "modlog", contains = "link to github.com (not on the allow list)" } } } },
      },
    },
    {
      name = "links: max counts the links of one message",
      config = { rules = { rule("many-links", { links = { max = 2 } }, { actions = { "block" } }) } },
      steps = {
        allowed("https://a.example https://b.example"),
        { message = "https://a.example https://b.example https://c.example",
          expect = { verdict = "block", replies = { { cid = "modlog", contains = "3 links (limit 2)" } } } },
      },
    },
    {
      name = "mentions: more than the limit fires",
      config = { rules = { rule("mention-limit", { mentions = 3 }, { actions = { "block" }, message = "too many mentions" }) } },
      steps = {
        allowed("@Jerry @Spike @Tyke lunch?"),
        { message = "@Jerry @Spike @Tyke @Butch lunch?", expect = { verdict = "block", reason = "too many mentions" } },
        allowed("mail tom@example.com, jerry@example.com, spike@example.com and butch@example.com"),
      },
    },
    {
      name = "rate: a fixed window per member and conversation; a steady talker is never caught",
      config = { rules = { rule("rate", { rate = { messages = 3, seconds = 10 } }, { actions = { "block" }, message = "slow down" }) } },
      steps = (function()
        local steps = { allowed("1"), allowed("2"), allowed("3"),
          { message = "4", expect = { verdict = "block", reason = "slow down" } },
          allowed("Jerry is fine", "Jerry"), allowed("another room", "Tom", "c2"),
          { advance = 10 }, allowed("new window") }
        -- one message every 4 s for two minutes: never more than 3 in one window
        for i = 1, 30 do
          steps[#steps + 1] = { advance = 4 }
          steps[#steps + 1] = allowed("steady " .. i)
        end
        return steps
      end)(),
    },
    {
      name = "duplicates: the same text three times in a minute from one member",
      config = { rules = { rule("repeats", { duplicates = { count = 3, seconds = 60, min_length = 5 } },
        { actions = { "block" }, message = "please do not repeat yourself" }) } },
      steps = {
        allowed("check out my channel"), allowed("Check out   my channel"), allowed("check out my channel", "Jerry"),
        { message = "check out my CHANNEL", expect = { verdict = "block", reason = "please do not repeat yourself" } },
        allowed("ok"), allowed("ok"), allowed("ok"), -- shorter than min_length
        { advance = 61 }, allowed("check out my channel"),
      },
    },
    {
      name = "duplicates across members: a spam wave is stopped at the N-th copy",
      config = { rules = { rule("wave", { duplicates = { count = 3, seconds = 30, across = true, min_length = 10 } },
        { actions = { "block", "alert" }, message = "this is being posted by many members" }) } },
      steps = {
        allowed("join my server for free stuff", "spam1"),
        allowed("join my server for free stuff", "spam2"),
        { message = { text = "join my server for free stuff", from = "spam3" },
          expect = { verdict = "block", reason = "this is being posted by many members", actions = {},
                     replies = { { cid = "modlog", match = "^block spam3 in c1 %(rule wave: the same text 3 times in 30 s %(several members%): \"join my server for free stuff\"%)" } } } },
        allowed("join my server for free stuff", "spam4", "c2"), -- counted per conversation
      },
    },
    {
      name = "caps: mostly capitals over the minimum length",
      config = { rules = { rule("caps", { caps = { ratio = 0.8, min_length = 12 } }, { actions = { "block" }, message = "no shouting" }) } },
      steps = {
        allowed("OK"), allowed("LOL"), allowed("NASA and the ESA launch today"),
        { message = "WHY IS NOBODY ANSWERING ME", expect = { verdict = "block", reason = "no shouting" } },
      },
    },
    {
      name = "emoji and zalgo floods",
      config = { rules = {
        rule("emoji", { emoji = 10 }, { actions = { "block" }, message = "too many emoji" }),
        rule("zalgo", { zalgo = 10 }, { actions = { "block" }, message = "unreadable" }),
      } },
      steps = {
        allowed("🎉🎉🎉 happy birthday 🎂"),
        { message = string.rep("😂", 11), expect = { verdict = "block", reason = "too many emoji" } },
        allowed("café, naïve, Tiếng Việt"),
        { message = "h" .. string.rep("\u{0301}\u{0316}\u{0334}", 6) .. "i" .. string.rep("\u{0300}\u{0317}", 5),
          expect = { verdict = "block", reason = "unreadable" } },
      },
    },
    -- Actions ---------------------------------------------------------------------------------------------
    {
      name = "warn only: the message goes through, the member is warned",
      config = { rules = { rule("rude", { keywords = { "idiot" } }, { actions = { "warn" }, message = "be kind" }) } },
      steps = {
        { message = "you idiot", expect = { verdict = "allow", actions = { { kind = "warn", user = "Tom", reason = "be kind" } },
          replies = { "@Tom be kind", { cid = "modlog", match = "^warn Tom in c1 %(rule rude: keyword 'idiot'%) by modbot$" } } } },
      },
    },
    {
      name = "delete: blocked silently; recall_blocked also recalls (a bot that is not the interceptor)",
      config = { rules = { rule("spam", { keywords = { "buy followers" } }, { actions = { "delete" } }) } },
      steps = {
        { message = "buy followers here", expect = { verdict = "block", silent = true, actions = {} } },
      },
    },
    {
      name = "delete with recall_blocked recalls the message",
      mode = "client",
      config = { recall_blocked = true, rules = { rule("spam", { keywords = { "buy followers" } }, { actions = { "delete" } }) } },
      steps = {
        { message = { text = "buy followers here", id = "bad1" },
          expect = { verdict = "block", silent = true, actions = { { kind = "recall", cid = "c1", id = "bad1" } } } },
      },
    },
    {
      name = "mute: a timed mute on the server with the rule's reason",
      config = { rules = { rule("invites", { keywords = { "discord.gg" } }, { actions = { "block", "mute" }, mute = "2h",
        message = "no invite links" }) } },
      steps = {
        { message = "join discord.gg/abc", expect = { verdict = "block",
          actions = { { kind = "mute", user = "Tom", seconds = 7200, reason = "no invite links" },
                      { kind = "warn", reason = "no invite links; muted for 2 h" } },
          replies = { "@Tom no invite links; muted for 2 h",
                      { cid = "modlog", match = "^block %+ mute 2 h Tom in c1 %(rule invites: keyword 'discord.gg'%) by modbot — undo: !mod pardon Tom c1$" } } } },
        { message = "hello?", expect = { verdict = "muted" } },
        { advance = 7201 }, allowed("back"),
      },
    },
    {
      name = "kick and ban (the conversation's block list on the server)",
      config = { rules = {
        rule("kickme", { keywords = { "kickword" } }, { actions = { "block", "kick" } }),
        rule("banme", { keywords = { "banword" } }, { actions = { "block", "ban" } }),
      } },
      steps = {
        { message = "kickword", expect = { verdict = "block", actions = { { kind = "kick", user = "Tom" } } } },
        { message = { text = "banword", from = "Jerry" },
          expect = { verdict = "block", actions = { { kind = "block", user = "Jerry" } },
                     replies = { { cid = "modlog", match = "^block %+ ban Jerry in c1" } } } },
      },
    },
    {
      name = "alert: the message goes through, the moderators see it in the mod-log",
      config = { rules = { rule("watch", { keywords = { "password" } }, { actions = { "alert" } }) } },
      steps = {
        { message = "what is the wifi password?", expect = { verdict = "allow", actions = {},
          replies = { { cid = "modlog", match = "^alert Tom in c1 %(rule watch: keyword 'password': \"what is the wifi password%?\"%) by modbot$" } } } },
      },
    },
    {
      name = "a mute longer than 4 weeks, an unknown action or trigger is refused at load (see ModerationRulesTests)",
      config = { rules = { rule("long", { keywords = { "x" } }, { actions = { "mute" }, mute = "4w" }) } },
      steps = {
        { message = "x", expect = { verdict = "allow", actions = { { kind = "mute", seconds = 2419200 }, { kind = "warn" } } } },
      },
    },
    -- Escalation ------------------------------------------------------------------------------------------
    {
      name = "a four-step ladder with durations: warn, mute 10 min, mute 1 day, kick",
      config = { ladder = { "warn", "mute 10m", "mute 1d", "kick" }, strike_ttl = 7 * 86400,
                 rules = { rule("bad", { keywords = { "badword" } }) } },
      steps = {
        { message = "badword", expect = { verdict = "block", actions = { { kind = "warn" } } } },
        { message = "badword", expect = { actions = { { kind = "mute", seconds = 600 }, { kind = "warn" } } } },
        { advance = 601 },
        { message = "badword", expect = { actions = { { kind = "mute", seconds = 86400 },
          { kind = "warn", reason = "that message is not allowed here (bad); muted for 1 d" } } } },
        { advance = 86401 },
        { message = "badword", expect = { actions = { { kind = "kick", user = "Tom" } } } },
        { expect_state = { ["conv:c1:banned:Tom"] = true } },
      },
    },
    {
      name = "strikes decay one by one: a member who stops offending is back to a warning",
      config = { ladder = { "warn", "mute 10m", "kick" }, strike_ttl = 3600, rules = { rule("bad", { keywords = { "badword" } }) } },
      steps = {
        { message = "badword", expect = { actions = { { kind = "warn" } } } },
        { advance = 3601 },
        { message = "badword", expect = { actions = { { kind = "warn" } } } },
      },
    },
    -- Where rules apply -----------------------------------------------------------------------------------
    {
      name = "conversations: a rule for one room only; exempt_conversations spares others",
      config = { rules = {
        rule("kids-room", { keywords = { "heck" } }, { actions = { "block" }, conversations = { "kids" } }),
        rule("no-links", { links = { max = 0 } }, { actions = { "block" }, exempt_conversations = { "links-ok" } }),
      } },
      steps = {
        allowed("what the heck", "Tom", "c1"),
        { message = { text = "what the heck", cid = "kids" }, expect = { verdict = "block" } },
        { message = "https://example.org", expect = { verdict = "block" } },
        allowed("https://example.org", "Tom", "links-ok"),
      },
    },
    {
      name = "exempt_roles: moderators (by role) and conversation managers are spared",
      members = { c1 = { Jerry = { role = "manager" }, Owen = { role = "owner" }, Tom = {} } },
      config = { rules = { rule("no-links", { links = { max = 0 } }, { actions = { "block" }, exempt_roles = { "manager" } }) } },
      steps = {
        allowed("https://example.org", "Jerry"),
        allowed("https://example.org", "Owen"),
        { message = "https://example.org", expect = { verdict = "block" } },
      },
    },
    {
      name = "new members: stricter rules for those who joined minutes ago, not for established members",
      config = { rules = { rule("newbie-links", { links = { max = 0 } }, { actions = { "block" }, new_members = { minutes = 10 },
        message = "new members cannot post links yet" }) } },
      steps = {
        { join = { cid = "c1", members = { "newbie" }, by = "newbie" } },
        { advance = 60 },
        { message = { text = "hi all, see https://example.org", from = "newbie" },
          expect = { verdict = "block", reason = "new members cannot post links yet" } },
        allowed("see https://example.org", "Tom"),
        { advance = 541 },
        allowed("see https://example.org", "newbie"),
      },
    },
    -- Dry run ---------------------------------------------------------------------------------------------
    {
      name = "dry run: nothing is done, the mod-log says what would have been; !mod dryrun turns it off",
      config = { rules = { rule("trial", { keywords = { "crypto" } }, { dry_run = true, actions = { "block", "mute" } }) } },
      steps = {
        { message = "crypto is up", expect = { verdict = "allow", actions = {},
          replies = { { cid = "modlog", match = "^%[dry run%] block, mute Tom in c1 %(rule trial: keyword 'crypto'%) by modbot$" } } } },
        { message = { text = "!mod rules", from = "Mod" }, expect = { replies = { "trial: 1 hit(s), block+mute [dry run]" } } },
        { message = { text = "!mod dryrun trial off", from = "Mod" }, expect = { replies = {
          { cid = "modlog", text = "dryrun off (rule trial) by Mod — undo: !mod dryrun trial on" }, "rule trial: dry run off" } } },
        { message = "crypto again", expect = { verdict = "block", actions = { { kind = "mute", seconds = 600 }, { kind = "warn" } } } },
        { message = { text = "!mod dryrun nosuch on", from = "Mod" }, expect = { replies = {
          "usage: !mod dryrun <rule> on|off (no rule nosuch)" } } },
      },
    },
    {
      name = "!mod rules lists the built-in and configured rules with their hits",
      config = { words = { "scam" }, rules = { rule("caps", { caps = { ratio = 0.8, min_length = 12 } }, { actions = { "block" } }) } },
      steps = {
        { message = "scam" }, { message = "THIS IS ALL CAPITALS!!" },
        { message = { text = "!mod rules", from = "Mod" }, expect = { replies = { table.concat({
          "word: 1 hit(s), block+strike (built in)",
          "caps: 1 hit(s), block" }, "\n") } } },
      },
    },
    -- Appeals, pardon, history ----------------------------------------------------------------------------
    {
      name = "!appeal opens a thread with the moderators; !mod pardon clears strikes, lifts the mute, closes it",
      config = { rules = { rule("bad", { keywords = { "badword" } }) } },
      steps = {
        { message = { text = "!appeal I did nothing", from = "Jerry" },
          expect = { replies = { "you have no recent moderation action to appeal" } } },
        { message = "badword" }, { message = "badword" },
        { message = "hello?", expect = { verdict = "muted" } },
        -- Muted in c1, Tom appeals from another conversation (his 1:1 with the bot).
        { message = { text = "!appeal it was a quote from the film", cid = "dm-tom" },
          expect = { verdict = "allow", replies = {
            { cid = "modlog", match = "^appeal #1 Tom in c1 %(rule bad: it was a quote from the film%) by Tom — undo: !mod pardon Tom$" },
            { cid = "dm-tom", text = "appeal #1 sent to the moderators" } } } },
        { message = { text = "!mod appeals", from = "Mod", cid = "modlog" },
          expect = { replies = { { match = "^#1 Tom %(0 s ago%): it was a quote from the film$" } } } },
        { message = { text = "!mod pardon Tom", from = "Mod", cid = "modlog" },
          expect = { actions = { { kind = "mute", cid = "c1", user = "Tom", seconds = 0 }, { kind = "mute", cid = "modlog", user = "Tom", seconds = 0 } },
                     replies = { { cid = "modlog", match = "^pardon Tom in modlog %(1 appeal%(s%) granted%) by Mod$" },
                                 "Tom is pardoned in c1, modlog: strikes cleared, mute lifted; 1 appeal(s) closed" } } },
        { expect = { absent = { "conv:c1:strikes:Tom", "appeals_open:Tom" } } },
        allowed("hello again"),
        { message = { text = "!mod appeals", from = "Mod" }, expect = { replies = { "no open appeals" } } },
      },
    },
    {
      name = "!mod history lists a member's recent actions, newest first",
      config = { rules = { rule("bad", { keywords = { "badword" } }) } },
      steps = {
        { message = "badword" }, { advance = 120 }, { message = "badword" }, { advance = 30 },
        { message = { text = "!mod history Tom", from = "Mod" }, expect = { replies = { table.concat({
          "Tom, newest first:",
          "30 s ago: block + mute 10 min + strike 2 Tom in c1 (rule bad: keyword 'badword') by modbot — undo: !mod pardon Tom c1",
          "2 min ago: block + warn + strike 1 Tom in c1 (rule bad: keyword 'badword') by modbot — undo: !mod pardon Tom c1" }, "\n") } } },
        { message = { text = "!mod history Jerry", from = "Mod" }, expect = { replies = { "no moderation history for Jerry" } } },
        { message = { text = "!mod history", from = "Mod" }, expect = { replies = { "usage: !mod history <user>" } } },
      },
    },
  },
}
