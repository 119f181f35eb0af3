-- gatekeeper speaks each member's language (language = "auto", ctx.t): a member who chose Chinese (!lang,
-- or a client sending attrs.lang = "zh-CN") is asked, answered and refused in Chinese, an English member in
-- English, and a wave's alert follows the conversation's language.

local QUESTIONS = { { q = "What colour is the sky?", a = { "blue" }, q_zh = "天空是什么颜色？", a_zh = { "蓝色" } } }

return {
  plugins = { "lang", "gatekeeper" },
  config = { plugins = { lang = { moderators = { "alice" } }, gatekeeper = { moderators = { "alice" } } } },
  cases = {
    {
      name = "小明 chose Chinese: the question, the refusal and the answers are in Chinese; Tom's in English",
      config = { plugins = { gatekeeper = { screening = true, kinds = {}, questions = QUESTIONS } } },
      steps = {
        { message = { cid = "lobby", text = "!lang zh-CN", from = "小明" } },
        { join = { members = { "小明" }, by = "小明" },
          expect = { replies = { { cid = "dm:小明", text = "要在 c1 发言，请回答：天空是什么颜色？" } },
                     actions = { { kind = "mute", user = "小明", seconds = 300, reason = "新成员：请与 modbot 私聊回答问题：天空是什么颜色？" } } } },
        { message = { from = "小明", text = "大家好" }, expect = { verdict = "muted" } },
        { message = { cid = "dm:小明", from = "小明", text = "绿色" },
          expect = { replies = { { cid = "dm:小明", text = "不对，还可以再试 2 次。天空是什么颜色？" } } } },
        { message = { cid = "dm:小明", from = "小明", text = "蓝色！" },
          expect = { replies = { { cid = "dm:小明", text = "谢谢，小明！现在可以在 c1 发言了。" } } } },
        { join = { members = { "Tom" }, by = "Tom" },
          expect = { replies = { { cid = "dm:Tom", text = "To post in c1, answer: What colour is the sky?" } } } },
        { message = { cid = "c2", text = "!answer 蓝色", from = "小明" }, expect = { replies = { "你没有待回答的问题" } } },
        { message = { cid = "c2", text = "!answer blue", from = "Tom" },
          expect = { replies = { "Thanks, Tom! You can post in c1 now." } } },
      },
    },
    {
      name = "arithmetic in Chinese",
      config = { plugins = { gatekeeper = { screening = true, kinds = { "math" } } } },
      steps = {
        { message = { cid = "lobby", text = "!lang zh-CN", from = "小红" } },
        { join = { members = { "小红" }, by = "小红" },
          expect = { replies = { { cid = "dm:小红", match = "^要在 c1 发言，请回答：%d .+ %d 等于几？$" } } } },
      },
    },
    {
      name = "a join wave's alert in the conversation's language",
      config = { plugins = { gatekeeper = { wave = { joins = 2, seconds = 10, surge = false } } } },
      steps = {
        { message = { text = "!lang here zh-CN", from = "alice" } },
        { join = { members = { "r1" }, by = "r1" } },
        { join = { members = { "r2" }, by = "r2" },
          expect = { replies = { { cid = "c1", text = "加入潮：10 秒内有 2 人加入。c1 已改为仅限邀请（15 分钟），新成员禁言 60 分钟。管理员：!gate unlock、!gate raid off。" } } } },
      },
    },
  },
}
