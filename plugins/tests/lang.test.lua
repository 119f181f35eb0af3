-- Scenarios for plugins/lang.lua: members choose their language, moderators a conversation's; the other
-- plugins' texts (here welcome.lua's) follow.

return {
  plugins = { "lang", "welcome" },
  config = { moderators = { "Mod" } },
  cases = {
    {
      name = "a member chooses Chinese; the choice follows them into another conversation",
      steps = {
        { message = { text = "!lang", from = "小明" },
          expect = { replies = { "Your language: English (en), the bot's default. Available: en, zh-CN; choose one with !lang <tag>." } } },
        { message = { text = "!lang zh_cn", from = "小明" }, expect = { replies = { "好的，之后我会用中文（zh-CN）跟你说话。" } } },
        { message = { text = "!lang", from = "小明" },
          expect = { replies = { "你的语言：中文（zh-CN），是你自己选的。可选：en, zh-CN；!lang reset 恢复为本会话的语言。" } } },
        -- welcome greets each joiner in their own language
        { join = { cid = "c2", members = { "小明" } }, expect = { replies = { { cid = "c2", text = "欢迎 小明！" } } } },
        { join = { cid = "c2", members = { "Tom" } }, expect = { replies = { { cid = "c2", text = "Welcome, Tom!" } } } },
        { message = { text = "!lang reset", from = "小明" },
          expect = { replies = { "OK, you get the conversation's language again: English (en)." } } },
        { message = { text = "!lang klingon!", from = "小明" },
          expect = { replies = { "'klingon!' is not a language tag; try en or zh-CN." } } },
      },
    },
    {
      name = "a client's attrs.lang counts until the member chooses",
      steps = {
        { message = { text = "!lang", from = "小红", attrs = { lang = "zh-CN" } },
          expect = { replies = { "你的语言：中文（zh-CN），来自你的客户端。可选：en, zh-CN；用 !lang <标签> 选择。" } } },
        { message = { text = "!lang en", from = "小红", attrs = { lang = "zh-CN" } },
          expect = { replies = { "OK, I will speak English (en) to you." } } },
        { message = { text = "!lang", from = "小红", attrs = { lang = "zh-CN" } },
          expect = { replies = { { match = "^Your language: English %(en%), your choice" } } } },
      },
    },
    {
      name = "moderators set a conversation's language; members may not",
      steps = {
        { message = { text = "!lang here zh-CN", from = "Tom" },
          expect = { replies = { "Only moderators and the conversation's managers can set its language." } } },
        { message = { text = "!lang here zh-CN", from = "Mod" }, expect = { replies = { "本会话的语言已设为中文（zh-CN）。" } } },
        { leave = { members = { "Tom" }, by = "Mod" }, expect = { replies = { "Tom 已被 Mod 移出。" } } },
        { message = { text = "!lang", from = "Jerry" },
          expect = { replies = { "你的语言：中文（zh-CN），是本会话的语言。可选：en, zh-CN；用 !lang <标签> 选择。" } } },
        { message = { text = "!lang", from = "Jerry", cid = "c2" }, expect = { replies = { { cid = "c2", match = "^Your language: English" } } } },
        { message = { text = "!lang here reset", from = "Mod" },
          expect = { replies = { "This conversation has no language of its own any more (the bot's default is en)." } } },
        { leave = { members = { "Jerry" } }, expect = { replies = { "Goodbye, Jerry." } } },
      },
    },
    {
      name = "a conversation attribute `locale` sets the conversation's language",
      steps = {
        { update = { attrs = { locale = "zh-CN" }, by = "Tom" } },
        { join = { members = { "Jerry" } }, expect = { replies = { "欢迎 Jerry！" } } },
        { update = { attrs = { locale = "" }, by = "Tom" } },
        { join = { members = { "Spike" } }, expect = { replies = { "Welcome, Spike!" } } },
        { update = { attrs = { locale = "not a tag" }, by = "Tom" }, expect = { logs = { "is not a locale tag" } } },
      },
    },
  },
}
