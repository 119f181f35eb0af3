-- Scenarios for plugins/banlist.lua (run with `swift run hookbot test plugins/`).

local function msg(text, from, cid) return { message = { text = text, from = from or "Tom", cid = cid or "c1" } } end

-- The bot learns the conversations it is in from what it sees there.
local function learn(...)
  local steps = {}
  for _, cid in ipairs({ ... }) do
    steps[#steps + 1] = { message = { text = "hello", from = "Jerry", cid = cid }, expect = { verdict = "allow", actions = {} } }
  end
  return steps
end

local function with(steps, ...)
  for _, more in ipairs({ ... }) do
    for _, s in ipairs(more) do steps[#steps + 1] = s end
  end
  return steps
end

local URL = "https://lists.example.org/hooks/banlist/list.json"
local OTHER = "https://other.example.net/hooks/banlist/list.json"
local TOKEN = "shared-token-0123456789"

return {
  plugins = { "banlist" },
  config = { moderators = { "Mod" } },
  cases = {
    {
      name = "in Chinese: a moderator whose app says zh-CN bans and lists; the banned member reads the refusal in Chinese",
      steps = with(learn("c1", "c2"), {
        { message = { text = "!ban @骗子 发诈骗链接", from = "Mod", attrs = { lang = "zh-CN" } },
          expect = { replies = { "骗子 已在 2 个会话中被封禁：发诈骗链接" } } },
        { message = { text = "!ban", from = "Mod", attrs = { lang = "zh-CN" } }, expect = { replies = { { contains = "usage" } } } },
        { message = { text = "!ban 骗子", from = "Mod", attrs = { lang = "zh-CN" } }, expect = { replies = { { contains = "usage" } } } },
        { message = { text = "!ban a* 刷屏", from = "Mod", attrs = { lang = "zh-CN" } },
          expect = { replies = { "!ban: 模式至少要有 3 个普通字符（a* 会匹配太多人）" } } },
        { message = { text = "!banlist", from = "Mod", attrs = { lang = "zh-CN" } },
          expect = { replies = { "1 条封禁:\n骗子 — 发诈骗链接（Mod，2023-11-14）" } } },
        { message = { text = "加我", from = "骗子", attrs = { lang = "zh-CN" } },
          expect = { verdict = "block", reason = "你在这里已被封禁：发诈骗链接" } },
        { message = { text = "hi", from = "骗子", cid = "c2" }, expect = { verdict = "block", reason = "you are banned here: 发诈骗链接" } },
        { message = { text = "!unban 骗子", from = "Mod", attrs = { lang = "zh-CN" } }, expect = { replies = { "骗子 已解封" } } },
        { message = { text = "!unban 骗子", from = "Mod", attrs = { lang = "zh-CN" } }, expect = { replies = { "骗子 不在封禁名单上" } } },
        { message = { text = "!banlist", from = "Mod", attrs = { lang = "zh-CN" } }, expect = { replies = { "封禁名单是空的" } } },
      }),
    },
    {
      name = "only moderators ban, and a reason is required",
      steps = {
        { message = "!ban Spammer links", expect = { replies = { "!ban is only for moderator" }, actions = {} } },
        { message = { text = "!ban Spammer", from = "Mod" },
          expect = { replies = { { contains = "usage: !ban <target> <reason:text>" } }, actions = {} } },
        { message = { text = "!ban Spammer    ", from = "Mod" },
          expect = { replies = { { contains = "usage" } }, actions = {} } },
        { expect_state = { ["ban:Spammer"] = NIL } },
      },
    },
    {
      name = "a ban blocks the member on the server in every conversation the bot is in",
      steps = with(learn("c1", "c2", "c3"), {
        { message = { text = "!ban @Spammer posting scam links", from = "Mod", cid = "c2" },
          expect = { replies = { "Spammer is banned in 3 conversation(s): posting scam links" },
                     actions = { { kind = "block", cid = "c1", user = "Spammer" },
                                 { kind = "block", cid = "c2", user = "Spammer" },
                                 { kind = "block", cid = "c3", user = "Spammer" } } } },
        { expect_state = { ["ban:Spammer"] = { reason = "posting scam links", by = "Mod", at = 1700000000 },
                           ["applied:Spammer"] = { c1 = true, c2 = true, c3 = true },
                           modlog = { { action = "ban", target = "Spammer", cid = "c2", by = "Mod",
                                        reason = "posting scam links", undo = "!unban Spammer" } } } },
        -- Still a member somewhere the server did not remove it (a bot that was not yet manager):
        -- its messages are refused as banned.
        { message = { text = "buy now", from = "Spammer", cid = "c3" },
          expect = { verdict = "block", reason = "you are banned here: posting scam links", code = 4330, actions = {} } },
        -- A conversation the bot joins later gets the block too.
        { invited = { cid = "c4", by = "Jerry" }, expect = { actions = { { kind = "block", cid = "c4", user = "Spammer" } } } },
        { join = { cid = "c5", members = { "modbot", "Jerry" } },
          expect = { actions = { { kind = "block", cid = "c5", user = "Spammer" } } } },
      }),
    },
    {
      name = "a banned member who joins anyway is blocked at once (on_member_joined)",
      steps = with(learn("c1"), {
        { message = { text = "!ban Spammer raids", from = "Mod" }, expect = { replies = { { contains = "banned in 1" } } } },
        { join = { cid = "c9", members = { "Spammer", "Jerry" } },
          expect = { actions = { { kind = "block", cid = "c9", user = "Spammer" } },
                     state = { ["applied:Spammer"] = { c1 = true, c9 = true } } } },
        { expect_state = { modlog = { { action = "ban" }, { action = "block", target = "Spammer", cid = "c9", rule = "Spammer", reason = "raids" } } } },
      }),
    },
    {
      name = "patterns: glob matches refuse members by id, and what they catch is blocked everywhere",
      steps = with(learn("c1", "c2"), {
        { message = { text = "!ban spam-* bulk accounts", from = "Mod" },
          expect = { replies = { "spam-* is banned in 2 conversation(s): bulk accounts" }, actions = {} } },
        { message = { text = "!ban *-bot-[0-9]* bot farm", from = "Mod" }, expect = { replies = { { contains = "is banned" } } } },
        { message = { text = "hi all", from = "spam-42", cid = "c2" },
          expect = { verdict = "block", reason = "you are banned here: bulk accounts",
                     actions = { { kind = "block", cid = "c2", user = "spam-42" }, { kind = "block", cid = "c1", user = "spam-42" } } } },
        { message = { text = "hi", from = "cheap-bot-7x", cid = "c1" }, expect = { verdict = "block", reason = "you are banned here: bot farm" } },
        { message = { text = "hi", from = "robot-bot-x", cid = "c1" }, expect = { verdict = "allow" } },
        { message = { text = "hi", from = "spam", cid = "c1" }, expect = { verdict = "allow" } },
        { message = { text = "hi", from = "nospam-1", cid = "c1" }, expect = { verdict = "allow" } },
        { join = { cid = "c1", members = { "spam-bot" } },
          expect = { actions = { { kind = "block", cid = "c1", user = "spam-bot" }, { kind = "block", cid = "c2", user = "spam-bot" } } } },
      }),
    },
    {
      name = "pattern classes, ? and ! work; too broad or malformed patterns are refused",
      steps = with(learn("c1"), {
        { message = { text = "!ban ?a?b* broad", from = "Mod" }, expect = { replies = { { contains = "at least 3 plain characters" } } } },
        { message = { text = "!ban *a* everyone", from = "Mod" }, expect = { replies = { "!ban: a pattern needs at least 3 plain characters (*a* would match too much)" } } },
        { message = { text = "!ban raid[0-9 x", from = "Mod" }, expect = { replies = { "!ban: unclosed [ in raid[0-9" } } },
        { message = { text = "!ban raid[a-c]?[!x]z letters", from = "Mod" }, expect = { replies = { { contains = "is banned" } } } },
        { message = { text = "x", from = "raidb1yz" }, expect = { verdict = "block" } },
        { message = { text = "x", from = "raidd1yz" }, expect = { verdict = "allow" } },
        { message = { text = "x", from = "raidb1xz" }, expect = { verdict = "allow" } },
        { message = { text = "!ban " .. string.rep("a", 65) .. " long", from = "Mod" }, expect = { replies = { "!ban: at most 64 characters" } } },
      }),
    },
    {
      name = "moderators, the bot and allowed ids are never banned",
      config = { allow = { "spam-friend" } },
      steps = with(learn("c1"), {
        { message = { text = "!ban Mod abuse", from = "Mod" }, expect = { replies = { "!ban: Mod is a moderator, the bot or on the allow list" } } },
        { message = { text = "!ban modbot abuse", from = "Mod" }, expect = { replies = { { contains = "is a moderator, the bot" } } } },
        { message = { text = "!ban spam-* bulk", from = "Mod" }, expect = { replies = { { contains = "is banned" } } } },
        { message = { text = "hi", from = "spam-friend" }, expect = { verdict = "allow", actions = {} } },
        { join = { cid = "c1", members = { "spam-friend" } }, expect = { actions = {} } },
      }),
    },
    {
      name = "unban lifts exactly the blocks the ban made; a pattern's catches are freed with it",
      steps = with(learn("c1", "c2"), {
        { message = { text = "!ban Spammer links", from = "Mod" }, expect = { replies = { { contains = "banned in 2" } } } },
        { message = { text = "!ban spam-* bulk", from = "Mod" } },
        { message = { text = "hello", from = "spam-1", cid = "c2" }, expect = { verdict = "block" } },
        { message = { text = "!unban Spammer", from = "Mod" },
          expect = { replies = { "Spammer is unbanned" }, -- spam-1's blocks stay

                     actions = { { kind = "unblock", cid = "c1", user = "Spammer" }, { kind = "unblock", cid = "c2", user = "Spammer" } } } },
        { message = { text = "!unban nobody", from = "Mod" }, expect = { replies = { "nobody is not on the ban list" } } },
        { message = { text = "!unban spam-*", from = "Mod" },
          expect = { replies = { "spam-* is unbanned" },
                     actions = { { kind = "unblock", cid = "c1", user = "spam-1" }, { kind = "unblock", cid = "c2", user = "spam-1" } } } },
        { message = { text = "hello again", from = "spam-1", cid = "c2" }, expect = { verdict = "allow" } },
        { expect_state = { ["applied:Spammer"] = NIL, ["applied:spam-1"] = NIL, ["ban:Spammer"] = NIL } },
        { message = { text = "!unban Spammer", from = "Tom" }, expect = { replies = { "!unban is only for moderator" } } },
      }),
    },
    {
      name = "a pattern unban keeps an id another ban still covers",
      steps = with(learn("c1"), {
        { message = { text = "!ban spam-* bulk", from = "Mod" } },
        { message = { text = "!ban spam-1? numbered", from = "Mod" } },
        { message = { text = "x", from = "spam-12" }, expect = { verdict = "block", actions = { { kind = "block", cid = "c1", user = "spam-12" } } } },
        { message = { text = "!unban spam-*", from = "Mod" }, expect = { replies = { "spam-* is unbanned" }, actions = {} } },
        { message = { text = "x", from = "spam-12" }, expect = { verdict = "block", reason = "you are banned here: numbered" } },
      }),
    },
    {
      name = "!banlist lists bans with reason, who and when, filtered",
      steps = {
        { message = { text = "!banlist", from = "Mod" }, expect = { replies = { "the ban list is empty" } } },
        { message = { text = "!ban Spammer scam links", from = "Mod" } },
        { message = { text = "!ban spam-* bulk accounts", from = "Mod" } },
        { message = { text = "!ban Raider joined a raid", from = "Mod" } },
        { message = { text = "!banlist", from = "Mod" },
          expect = { replies = { "3 ban(s):\nRaider — joined a raid (by Mod, 2023-11-14)\nSpammer — scam links (by Mod, 2023-11-14)\nspam-* — bulk accounts (by Mod, 2023-11-14)" } } },
        { message = { text = "!banlist spam", from = "Mod" },
          expect = { replies = { "2 ban(s) matching spam:\nSpammer — scam links (by Mod, 2023-11-14)\nspam-* — bulk accounts (by Mod, 2023-11-14)" } } },
        { message = { text = "!banlist raid", from = "Mod" }, expect = { replies = { { match = "^1 ban%(s%) matching raid:\nRaider" } } } },
        { message = { text = "!banlist nothing", from = "Mod" }, expect = { replies = { "no bans match nothing" } } },
        { message = { text = "!banlist", from = "Tom" }, expect = { replies = { "!banlist is only for moderator" } } },
      },
    },
    {
      name = "the list applies only in the configured conversations",
      config = { conversations = { "c1" }, exclude = { "c3" } },
      steps = with(learn("c1", "c2", "c3"), {
        { message = { text = "!ban Spammer links", from = "Mod", cid = "c2" },
          expect = { replies = { "Spammer is banned in 1 conversation(s): links" }, actions = { { kind = "block", cid = "c1", user = "Spammer" } } } },
        { message = { text = "hi", from = "Spammer", cid = "c2" }, expect = { verdict = "allow" } },
        { message = { text = "hi", from = "Spammer", cid = "c1" }, expect = { verdict = "block" } },
        { join = { cid = "c3", members = { "Spammer" } }, expect = { actions = {} } },
      }),
    },
    {
      name = "bans survive a reload, and a reload brings new block lists in line",
      steps = with(learn("c1"), {
        { message = { text = "!ban Spammer links", from = "Mod" } },
        { reload = true },
        { message = { text = "hi", from = "Spammer" }, expect = { verdict = "block", reason = "you are banned here: links" } },
        { set_state = { convs = { c1 = true, c7 = true } } },
        { reload = true },
        { advance = 1.5, expect = { actions = { { kind = "block", cid = "c7", user = "Spammer" } } } },
        { advance = 1.5, expect = { actions = {} } },
      }),
    },
    {
      name = "the bot stops acting in a conversation it was removed from",
      steps = with(learn("c1", "c2"), {
        { kicked = { cid = "c2", by = "Jerry" } },
        { message = { text = "!ban Spammer links", from = "Mod" },
          expect = { replies = { "Spammer is banned in 1 conversation(s): links" }, actions = { { kind = "block", cid = "c1", user = "Spammer" } } } },
      }),
    },
    {
      name = "every ban goes to the mod-log conversation",
      config = { modlog = "mods" },
      steps = with(learn("c1"), {
        { message = { text = "!ban Spammer links", from = "Mod" },
          expect = { replies = { { cid = "mods", text = "ban Spammer in c1 (links) by Mod — undo: !unban Spammer" },
                                 "Spammer is banned in 1 conversation(s): links" } } },
      }),
    },
    -- Subscriptions
    {
      name = "a subscribed list is fetched with its token and applied, marked with its source",
      config = { subscribe = { { url = URL, token = TOKEN, every = 60 } } },
      http = { ["GET " .. URL] = { status = 200, body = { name = "ops", entries = {
        { target = "raider", reason = "raid on 2024-05-01", by = "ops", at = 1699990000 },
        { target = "farm-*", reason = "bot farm" },
      } } } },
      steps = with(learn("c1", "c2"), {
        { advance = 0.1,
          expect = { http = { { method = "GET", url = URL, status = 200 } },
                     actions = { { kind = "block", cid = "c1", user = "raider" }, { kind = "block", cid = "c2", user = "raider" } } } },
        { message = { text = "hi", from = "farm-3", cid = "c2" }, expect = { verdict = "block", reason = "you are banned here: bot farm" } },
        { message = { text = "!banlist", from = "Mod" },
          expect = { replies = { "2 ban(s):\nfarm-* — bot farm (by ?, ?) [" .. URL .. "]\nraider — raid on 2024-05-01 (by ops, 2023-11-14) [" .. URL .. "]" } } },
        { message = { text = "!unban raider", from = "Mod" },
          expect = { replies = { "raider is banned by the list " .. URL .. ", not here; add it to allow to override" } } },
        { expect_state = { modlog = { { action = "list update", target = URL, reason = "+2 −0, 2 entries" } } } },
        -- refreshed every 60 s; an unchanged list changes nothing
        { advance = 60, expect = { http = { URL }, actions = {} } },
      }),
    },
    {
      name = "a remote entry removed from its list is lifted, unless another list still has it",
      config = { subscribe = { { url = URL, every = 60 }, { url = OTHER, every = 60 } } },
      http = {
        ["GET " .. URL] = { status = 200, body = { entries = { { target = "kept", reason = "still bad" } } } },
        ["GET " .. OTHER] = { status = 200, body = { entries = { { target = "both", reason = "listed twice" } } } },
      },
      steps = with(learn("c1"), {
        -- the last copies fetched held "gone" and "both" on the first list
        { set_state = { ["remote:" .. URL] = { entries = { { target = "gone", reason = "old" }, { target = "both", reason = "old" } } },
                        ["remote:" .. OTHER] = { entries = { { target = "both", reason = "listed twice" } } },
                        ["applied:gone"] = { c1 = true }, ["applied:both"] = { c1 = true } } },
        { reload = true },
        { advance = 0.1,
          expect = { actions = { { kind = "unblock", cid = "c1", user = "gone" }, { kind = "block", cid = "c1", user = "kept" } } } },
        { message = { text = "x", from = "both" }, expect = { verdict = "block", reason = "you are banned here: listed twice" } },
        { message = { text = "x", from = "gone" }, expect = { verdict = "allow" } },
        { expect_state = { ["applied:gone"] = NIL, ["applied:both"] = { c1 = true } } },
      }),
    },
    {
      name = "bad remote data is logged and ignored; the last good copy stays in force",
      config = { subscribe = { { url = URL, every = 60 } } },
      http = { ["GET " .. URL] = { status = 200, body = "<html>oops</html>" } },
      steps = with(learn("c1"), {
        { set_state = { ["remote:" .. URL] = { entries = { { target = "raider", reason = "raid" } } } } },
        { reload = true },
        { advance = 0.1, expect = { logs = { "list " .. URL .. " ignored, keeping the last good copy: not JSON" } } },
        { message = { text = "x", from = "raider" }, expect = { verdict = "block", reason = "you are banned here: raid" } },
      }),
    },
    {
      name = "a list of the wrong shape is ignored",
      config = { subscribe = { { url = URL, every = 60 } } },
      http = { ["GET " .. URL] = { status = 200, body = { entries = "everyone" } } },
      steps = with(learn("c1"), {
        { advance = 0.1, expect = { logs = { "keeping the last good copy: no entries list" }, actions = {} } },
      }),
    },
    {
      name = "malformed entries are skipped, the rest applied",
      config = { subscribe = { { url = URL, every = 60 } } },
      http = { ["GET " .. URL] = { status = 200, body = { entries = {
        { target = "ok-one", reason = "fine" }, { target = "noreason" }, { target = "*", reason = "everyone" }, "junk",
      } } } },
      steps = with(learn("c1"), {
        { advance = 0.1, expect = { logs = { "3 malformed entries skipped" }, actions = { { kind = "block", cid = "c1", user = "ok-one" } } } },
      }),
    },
    {
      name = "a list over max_entries is refused whole",
      config = { max_entries = 2, subscribe = { { url = URL, every = 60 } } },
      http = { ["GET " .. URL] = { status = 200, body = { entries = {
        { target = "a-1", reason = "x" }, { target = "a-2", reason = "x" }, { target = "a-3", reason = "x" },
      } } } },
      steps = with(learn("c1"), {
        { advance = 0.1, expect = { logs = { "3 entries, more than max_entries (2)" }, actions = {} } },
        { message = { text = "!ban one first", from = "Mod" } },
        { message = { text = "!ban two second", from = "Mod" } },
        { message = { text = "!ban three third", from = "Mod" }, expect = { replies = { "!ban: the list is full (2 entries, max_entries)" } } },
      }),
    },
    {
      name = "an unreachable list keeps its last copy and the error is recorded",
      config = { subscribe = { { url = URL, every = 60 } } },
      http = { ["GET " .. URL] = { error = "timeout: no answer in 10 s" } },
      steps = with(learn("c1"), {
        { set_state = { ["remote:" .. URL] = { entries = { { target = "raider", reason = "raid" } } } } },
        { reload = true },
        { advance = 0.1, expect = { logs = { "keeping the last good copy: timeout: no answer in 10 s" } } },
        { message = { text = "x", from = "raider" }, expect = { verdict = "block" } },
        { expect_state = { ["remote:" .. URL] = { entries = { { target = "raider", reason = "raid" } }, error = "timeout: no answer in 10 s" } } },
      }),
    },
  },
}
