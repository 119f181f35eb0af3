-- Scenarios for plugins/reports.lua (run with `swift run hookbot test plugins/`).

-- A message from `from` in c1 (its id is m<step>).
local function say(text, from, cid) return { message = { text = text, from = from, cid = cid or "c1" } } end

-- `!report` sent as a reply to message `id`.
local function report(from, id, reason, expect)
  return { message = { text = "!report" .. (reason and (" " .. reason) or ""), from = from, attrs = { reply_to = id } },
           expect = expect }
end

return {
  plugins = { "reports" },
  config = { moderators = { "Mod" }, trusted = { "Tina" }, modlog = "mods" },
  cases = {
    {
      name = "in Chinese: members and a moderator whose apps say attrs.lang = zh-CN",
      steps = {
        say("加我微信领红包", "骗子"), -- m1
        { message = { text = "!report 广告", from = "小明", attrs = { reply_to = "m1", lang = "zh-CN" } },
          expect = { replies = { "举报 #1 已记录（成员，权重 1）" } } },
        { message = { text = "!report", from = "小明", attrs = { reply_to = "m1", lang = "zh-CN" } },
          expect = { replies = { "你已经举报过这条消息了（举报 #1）" } } },
        { message = { text = "!report 看不懂", from = "小红", attrs = { reply_to = "m3", lang = "zh-CN" } },
          expect = { replies = { "我不记得那条消息是谁发的；请用 !report @用户 <理由>" } } },
        -- an English member in the same conversation still reads English
        { message = { text = "!report", from = "Ann", attrs = { reply_to = "m1" } },
          expect = { replies = { "report #1 noted (member, weight 1)" } } },
        { message = { text = "!reports", from = "Mod", attrs = { lang = "zh-CN" } },
          expect = { replies = { "1 条待处理的举报:\n#1 待处理 骗子 的消息 m1，在 c1（2 人举报，分数 2）：广告 — “加我微信领红包”" } } },
        { message = { text = "!resolve 1 uphold mute 15", from = "Mod", attrs = { lang = "zh-CN" } },
          expect = { replies = { { cid = "mods" }, "举报 #1 成立：禁言 15 分钟 骗子" } } },
        { message = { text = "!resolve 1 dismiss", from = "Mod", attrs = { lang = "zh-CN" } },
          expect = { replies = { "举报 #1 已处理：已成立（由 Mod）" } } },
      },
    },
    {
      name = "three members' reports hide a message and alert the moderators",
      steps = {
        say("buy followers at scam.example", "Spammer"), -- m1
        report("Ann", "m1", "spam", { replies = { "report #1 noted (member, weight 1)" }, actions = {} }),
        report("Bob", "m1", "scam link", { replies = { "report #1 noted (member, weight 1)" }, actions = {} }),
        report("Cat", "m1", nil, {
          actions = { { kind = "recall", cid = "c1", id = "m1" } },
          replies = {
            { cid = "mods", text = "recall Spammer in c1 (rule report #1: score 3 ≥ 3: spam; scam link) by reports — undo: !resolve 1 dismiss" },
            "report #1 noted (member, weight 1); the message is hidden until a moderator reviews it" } }),
        { expect_state = { ["report:1"] = { id = 1, cid = "c1", msg = "m1", user = "Spammer", status = "hidden", score = 3,
                                            reporters = { Ann = 1, Bob = 1, Cat = 1 }, reasons = { "spam", "scam link" },
                                            text = "buy followers at scam.example" },
                           ["msg:c1:m1"] = 1 } },
        -- a fourth report adds to the score but recalls nothing again
        report("Dan", "m1", nil, { actions = {}, replies = { "report #1 noted (member, weight 1)" } }),
      },
    },
    {
      name = "trusted reporters and moderators count more",
      steps = {
        say("rude words", "Troll"),
        report("Tina", "m1", "abuse", { replies = { "report #1 noted (trusted, weight 2)" }, actions = {} }),
        report("Mod", "m1", nil, { actions = { { kind = "recall", cid = "c1", id = "m1" } },
          replies = { { cid = "mods" }, "report #1 noted (moderator, weight 3); the message is hidden until a moderator reviews it" } }),
      },
    },
    {
      name = "weights and thresholds come from the config",
      config = { threshold = 5, weights = { member = 1, trusted = 4, moderator = 5 } },
      steps = {
        say("meh", "Troll"),
        report("Tina", "m1", nil, { replies = { "report #1 noted (trusted, weight 4)" }, actions = {} }),
        report("Ann", "m1", nil, { actions = { { kind = "recall", cid = "c1", id = "m1" } } }),
      },
    },
    {
      name = "a member cannot report the same message twice, nor themselves, nor the bot",
      steps = {
        say("hello", "Tom"),
        report("Ann", "m1", nil, { replies = { "report #1 noted (member, weight 1)" } }),
        report("Ann", "m1", "again", { replies = { "you already reported this message (report #1)" } }),
        report("Tom", "m1", nil, { replies = { "you cannot report yourself" } }),
        { message = { text = "!report", from = "Bob", attrs = { reply_to = { id = "m9", from = "modbot" } } },
          expect = { replies = { "the bot's messages cannot be reported" } } },
        { expect_state = { ["report:1"] = { score = 1, reporters = { Ann = 1 } } } },
      },
    },
    {
      name = "members of trusted_days standing with no upheld report against them are trusted",
      members = { c1 = { Old = { ago = 40 * 86400 }, New = { ago = 3600 }, Bad = { ago = 40 * 86400 }, Spammer = { ago = 60 } } },
      config = { threshold = 10 },
      steps = {
        say("spam", "Spammer"),
        report("Old", "m1", nil, { replies = { "report #1 noted (trusted, weight 2)" } }),
        report("New", "m1", nil, { replies = { "report #1 noted (member, weight 1)" } }),
        { set_state = { ["sanction:Bad"] = 1700000000 } },
        report("Bad", "m1", nil, { replies = { "report #1 noted (member, weight 1)" } }),
        report("Stranger", "m1", nil, { replies = { "report #1 noted (member, weight 1)" } }),
      },
    },
    {
      name = "an upheld report costs a member the trusted standing",
      members = { c1 = { Old = { ago = 40 * 86400 } } },
      config = { threshold = 10 },
      steps = {
        say("rude", "Old"), say("spam", "Spammer"),
        report("Ann", "m1"),
        { message = { text = "!resolve 1 uphold", from = "Mod" }, expect = { replies = { { cid = "mods" }, "report #1 upheld" } } },
        report("Old", "m2", nil, { replies = { "report #2 noted (member, weight 1)" } }),
      },
    },
    {
      name = "reports by message id and by @user; a reply needs a message to point at",
      steps = {
        say("spam spam", "Spammer"), -- m1
        { message = { text = "!report m1 flooding", from = "Ann" }, expect = { replies = { "report #1 noted (member, weight 1)" } } },
        { message = { text = "!report @Spammer keeps sending invites", from = "Bob" }, expect = { replies = { "report #2 noted (member, weight 1)" } } },
        { message = { text = "!report this is bad", from = "Cat" },
          expect = { replies = { "reply to the message with !report [reason], or !report <message id|@user> <reason>" } } },
        { message = { text = "!report", from = "Cat", attrs = { reply_to = "m77" } },
          expect = { replies = { "I do not remember who wrote that message; use !report @user <reason>" } } },
        { message = { text = "!report", from = "Cat", attrs = { reply_to = { id = "m77", from = "Spammer" } } },
          expect = { replies = { "report #3 noted (member, weight 1)" } } },
        { expect_state = { ["report:2"] = { user = "Spammer", reasons = { "keeps sending invites" } },
                           ["report:3"] = { user = "Spammer", msg = "m77" } } },
      },
    },
    {
      name = "reports against a member alert the moderators at user_threshold, recalling nothing",
      config = { user_threshold = 2 },
      steps = {
        { message = { text = "!report @Creep sends DMs", from = "Ann" }, expect = { actions = {} } },
        { message = { text = "!report @Creep", from = "Bob" },
          expect = { actions = {}, replies = { { cid = "mods", text = "alert Creep in c1 (rule report #1: score 2 ≥ 2: sends DMs) by reports" },
                                               "report #1 noted (member, weight 1)" } } },
      },
    },
    {
      name = "moderators list open reports; others may not",
      steps = {
        say("one", "A"), say("two", "B"),
        report("Ann", "m1", "spam"),
        report("Ann", "m2", "rude"),
        { message = { text = "!reports", from = "Mod" },
          expect = { replies = { "2 open report(s):\n#2 open message m2 by B in c1 (score 1 from 1 reporter): rude — \"two\"\n#1 open message m1 by A in c1 (score 1 from 1 reporter): spam — \"one\"" } } },
        { message = { text = "!reports", from = "Ann" }, expect = { replies = { "!reports is only for moderator or admin" } } },
        { message = { text = "!resolve 1 dismiss", from = "Ann" }, expect = { replies = { "!resolve is only for moderator or admin" } } },
      },
    },
    {
      name = "dismissing a hidden message restores its text; it cannot be resolved twice",
      config = { threshold = 1 },
      steps = {
        say("a fine message", "Tom"),
        report("Ann", "m1", "wrong", { actions = { { kind = "recall", cid = "c1", id = "m1" } } }),
        { message = { text = "!resolve 1 dismiss", from = "Mod" },
          expect = { actions = {},
                     replies = { { cid = "c1", text = "restored after review — Tom wrote: a fine message" },
                                 { cid = "mods", text = "dismiss Tom in c1 (rule report #1) by Mod" },
                                 "report #1 dismissed; the message is restored" } } },
        { message = { text = "!resolve 1 uphold kick", from = "Mod" }, expect = { replies = { "report #1 is already dismissed (by Mod)" } } },
        report("Bob", "m1", nil, { replies = { "that message was already reviewed (report #1, dismissed)" } }),
        { message = { text = "!reports", from = "Mod" }, expect = { replies = { "no open reports" } } },
        { message = { text = "!reports all", from = "Mod" }, expect = { replies = { { match = "^1 report%(s%):\n#1 dismissed message m1 by Tom" } } } },
      },
    },
    {
      name = "uphold acts through the server: mute, kick, ban, warn, or nothing",
      config = { threshold = 1 },
      steps = {
        say("spam 1", "S1"), say("spam 2", "S2"), say("spam 3", "S3"), say("spam 4", "S4"), say("spam 5", "S5"),
        report("Ann", "m1", "spam"), report("Ann", "m2", "spam"), report("Ann", "m3", "spam"),
        report("Ann", "m4", "spam"), report("Ann", "m5", "spam"),
        { message = { text = "!resolve 1 uphold mute 30", from = "Mod" },
          expect = { actions = { { kind = "mute", cid = "c1", user = "S1", seconds = 1800 } },
                     replies = { { cid = "mods", text = "uphold + mute 30 min S1 in c1 (rule report #1: spam) by Mod — undo: unmute S1 in c1" },
                                 "report #1 upheld: mute 30 min S1" } } },
        { message = { text = "!resolve 2 uphold kick", from = "Mod" },
          expect = { actions = { { kind = "kick", cid = "c1", user = "S2" } }, replies = { { cid = "mods" }, "report #2 upheld: kick S2" } } },
        { message = { text = "!resolve 3 uphold ban", from = "Mod" },
          expect = { actions = { { kind = "block", cid = "c1", user = "S3" } }, replies = { { cid = "mods" }, "report #3 upheld: ban S3" } } },
        { message = { text = "!resolve 4 uphold warn", from = "Mod" },
          expect = { actions = { { kind = "warn", cid = "c1", user = "S4" } } } },
        { message = { text = "!resolve 5 uphold", from = "Mod" }, expect = { actions = {}, replies = { { cid = "mods" }, "report #5 upheld" } } },
        { expect_state = { ["report:1"] = { status = "upheld", action = "mute", resolved_by = "Mod" }, ["sanction:S1"] = 1700000000 } },
      },
    },
    {
      name = "upholding a report below the threshold recalls the message then",
      steps = {
        say("spam", "S1"),
        report("Ann", "m1", "spam", { actions = {} }),
        { message = { text = "!resolve 1 uphold mute", from = "Mod" },
          expect = { actions = { { kind = "recall", cid = "c1", id = "m1" }, { kind = "mute", user = "S1", seconds = 3600 } } } },
      },
    },
    {
      name = "bad resolutions get a clear answer",
      steps = {
        say("x", "S1"), report("Ann", "m1"),
        { message = { text = "!resolve 9 dismiss", from = "Mod" }, expect = { replies = { "no report #9" } } },
        { message = { text = "!resolve 1 maybe", from = "Mod" }, expect = { replies = { "usage: !resolve <n> dismiss|uphold [warn|mute [minutes]|kick|ban]" } } },
        { message = { text = "!resolve 1 uphold explode", from = "Mod" }, expect = { replies = { "uphold takes warn, mute [minutes], kick, ban or none, not explode" } } },
        { message = { text = "!resolve 1 uphold kick 5", from = "Mod" }, expect = { replies = { "only mute takes minutes" } } },
        { message = { text = "!resolve 1 uphold mute 99999", from = "Mod" }, expect = { replies = { "mute for 1 to 40320 minutes (4 weeks)" } } },
        { message = { text = "!resolve 1 dismiss now", from = "Mod" }, expect = { replies = { "dismiss takes no action" } } },
        { message = { text = "!resolve x dismiss", from = "Mod" }, expect = { replies = { { contains = "usage: !resolve" } } } },
        { expect_state = { ["report:1"] = { status = "open" } } },
      },
    },
    {
      name = "reports against moderators go to the admins only and are never acted on alone",
      config = { threshold = 1, admin_log = "owners" },
      steps = {
        say("a moderator's message", "Mod"),
        report("Ann", "m1", "abuse of power", {
          actions = {},
          replies = { { cid = "owners", text = "report #1 against Mod (a moderator) in c1: score 1 ≥ 1: abuse of power" },
                      "report #1 noted (member, weight 1)" } }),
        { message = { text = "!reports", from = "Mod" }, expect = { replies = { "no open reports" } } },
        { message = { text = "!resolve 1 uphold kick", from = "Mod" }, expect = { replies = { "no report #1" } } },
        { expect_state = { modlog = NIL, ["report:1"] = { against_mod = true, status = "open" } } },
      },
    },
    {
      name = "admins see and resolve reports against moderators",
      config = { threshold = 1, admin_role = "moderator" },
      steps = {
        -- with admin_role = moderator, moderators are the admins: Mod2 reviews a report against Mod
        say("hm", "Mod"),
        report("Ann", "m1", "rude", { actions = {} }),
        { message = { text = "!reports", from = "Mod" }, expect = { replies = { { match = "^1 open report%(s%):\n#1 open message m1 by Mod" } } } },
        { message = { text = "!resolve 1 uphold warn", from = "Mod" },
          expect = { actions = { { kind = "recall", id = "m1" }, { kind = "warn", user = "Mod" } }, replies = { "@Mod report #1: rude", "report #1 upheld: warn Mod" } } },
      },
    },
    {
      name = "only recent messages are remembered",
      config = { remember = 2 },
      steps = {
        say("1", "A"), say("2", "B"), say("3", "C"), say("4", "D"), say("5", "E"), say("6", "F"),
        { message = { text = "!report m1 old", from = "Ann" }, expect = { replies = { { contains = "reply to the message" } } } },
        { message = { text = "!report m6 new", from = "Ann" }, expect = { replies = { "report #1 noted (member, weight 1)" } } },
      },
    },
  },
}
