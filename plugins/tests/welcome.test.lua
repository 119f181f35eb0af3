-- Scenarios for plugins/welcome.lua. The runner's clock starts at 1700000000 (2023-11-14 UTC).

return {
  plugins = { "welcome" },
  cases = {
    {
      name = "greets each new member and remembers the first join",
      steps = {
        { join = { cid = "c1", members = { "Tom", "Jerry" }, by = "Spike" },
          expect = { replies = { { cid = "c1", text = "Welcome, Tom!" }, { cid = "c1", text = "Welcome, Jerry!" } } } },
        { expect_state = { ["conv:c1:first:Tom"] = 1700000000, ["conv:c1:joins:Tom"] = 1 } },
      },
    },
    {
      name = "founders of a new conversation are not greeted; a later joiner is",
      steps = {
        { join = { cid = "c1", members = { "Spike", "Tom", "Jerry" }, by = "Spike", founding = true },
          expect = { replies = {} } },
        { join = { cid = "c1", members = { "Tyke" }, by = "Tyke" }, expect = { replies = { "Welcome, Tyke!" } } },
        { expect_state = { ["conv:c1:first:Tom"] = NIL, ["conv:c1:first:Tyke"] = 1700000000 } },
      },
    },
    {
      name = "a returning member is welcomed back with the first-join date",
      steps = {
        { join = { members = { "Tom" } } },
        { advance = 86400 * 3 },
        { leave = { members = { "Tom" } }, expect = { replies = { "Goodbye, Tom." } } },
        { join = { members = { "Tom" } }, expect = { replies = { "Welcome back, Tom! You first joined on 2023-11-14." } } },
        { expect_state = { ["conv:c1:first:Tom"] = 1700000000, ["conv:c1:joins:Tom"] = 2 } },
      },
    },
    {
      name = "first joins are per conversation",
      steps = {
        { join = { cid = "c1", members = { "Tom" } } },
        { join = { cid = "c2", members = { "Tom" } }, expect = { replies = { { cid = "c2", text = "Welcome, Tom!" } } } },
      },
    },
    {
      name = "removal by someone else is announced differently",
      steps = {
        { leave = { members = { "Tom" }, by = "Spike" }, expect = { replies = { "Tom was removed by Spike." } } },
        { leave = { members = { "Jerry" }, by = "Jerry" }, expect = { replies = { "Goodbye, Jerry." } } },
      },
    },
    {
      name = "bots in skip are not greeted",
      config = { skip = { "modbot", "otherbot" } },
      steps = {
        { join = { members = { "otherbot", "Tom", "modbot" } }, expect = { replies = { "Welcome, Tom!" } } },
      },
    },
    {
      name = "custom templates and empty templates",
      config = { greeting = "{user} joined {conversation} (added by {by})", goodbye = "", removed = "" },
      steps = {
        { join = { cid = "room", members = { "Tom" }, by = "Jerry" }, expect = { replies = { "Tom joined room (added by Jerry)" } } },
        { leave = { cid = "room", members = { "Tom" }, by = "Jerry" }, expect = { replies = {} } },
        { leave = { cid = "room", members = { "Jerry" } }, expect = { replies = {} } },
      },
    },
    {
      name = "introduces itself when the bot is invited",
      steps = {
        { invited = { cid = "new", by = "Tom" }, expect = { replies = { { cid = "new", match = "^Hi! I am a bot" } } } },
      },
    },
    {
      name = "in Chinese: a member who chose Chinese is greeted in Chinese, others in English; goodbyes in the conversation's language",
      members = { c1 = { ["小明"] = { locale = "zh-CN" } } },
      steps = {
        { join = { members = { "小明", "Tom" }, by = "Spike" }, expect = { replies = { "欢迎 小明！", "Welcome, Tom!" } } },
        { join = { members = { "小红" }, by = "Spike" }, expect = { replies = { "Welcome, 小红!" } } },
        { advance = 86400 },
        { leave = { members = { "小明" } }, expect = { replies = { "Goodbye, 小明." } } },
        { join = { members = { "小明" } }, expect = { replies = { "欢迎回来，小明！你第一次加入是在 2023-11-14。" } } },
        -- the conversation's language is Chinese (lang.lua's `!lang here zh-CN`)
        { set_state = { plugin = "hookbot.locale", ["conv:c1"] = "zh-CN" } },
        { leave = { members = { "Tom" }, by = "小明" }, expect = { replies = { "Tom 已被 小明 移出。" } } },
        { invited = { cid = "c1", by = "小明" }, expect = { replies = { "大家好！我是机器人。发送 !help 看看我能做什么。" } } },
      },
    },
    {
      name = "no introduction when intro is empty",
      config = { intro = "" },
      steps = { { invited = { cid = "new", by = "Tom" }, expect = { replies = {} } } },
    },
  },
}
