-- The shipped default rules tell each member in their own language (ctx.t, plugins/locales/moderation/):
-- 小明 chose Chinese (!lang zh-CN), Tom did not. A rule with your own wording keeps it in every language.

return {
  plugins = { "lang", "moderation" },
  config = { plugins = { moderation = { moderators = { "Mod" }, words = { "诈骗群" } } } },
  cases = {
    {
      name = "a scam phrase is refused in Chinese for 小明, in English for Tom",
      steps = {
        { message = { cid = "lobby", text = "!lang zh-CN", from = "小明" } },
        { message = { text = "兼职刷单，日赚三百，加我", from = "小明" },
          expect = { verdict = "block", reason = "这看起来像诈骗", replies = { "@小明 这看起来像诈骗" } } },
        { message = { text = "FREE NITRO for everyone, claim it now", from = "Tom" },
          expect = { verdict = "block", reason = "that looks like a scam", replies = { "@Tom that looks like a scam" } } },
      },
    },
    {
      name = "the ladder: a warning, then a mute, each in Chinese; the muted member's refusal too",
      steps = {
        { message = { cid = "lobby", text = "!lang zh-CN", from = "小明" } },
        { message = { text = "快来加入诈骗群", from = "小明" },
          expect = { verdict = "block", replies = { "@小明 请注意用语" } } },
        { advance = 5 },
        { message = { text = "诈骗群 😂", from = "小明" },
          expect = { verdict = "block", replies = { "@小明 请注意用语；禁言 10 min" },
                     actions = { { kind = "mute", user = "小明", seconds = 600, reason = "请注意用语" },
                                 { kind = "warn", user = "小明", reason = "请注意用语；禁言 10 min" } } } },
        { message = { text = "为什么不能说话？", from = "小明" }, expect = { verdict = "muted" } },
      },
    },
    {
      name = "new members: links are held, in Chinese; an appeal is answered in the member's language",
      steps = {
        { message = { cid = "lobby", text = "!lang zh-CN", from = "新人" } },
        { join = { cid = "c1", members = { "新人" }, by = "新人" } },
        { message = { text = "我的博客 https://example.cn/blog", from = "新人" },
          expect = { verdict = "block", reason = "新成员暂时不能发链接" } },
        { message = { text = "!appeal 我只是分享博客", from = "新人" }, expect = { replies = { "申诉 #1 已发送给管理员" } } },
        { message = { text = "!appeal 再看看", from = "Tom" }, expect = { replies = { "you have no recent moderation action to appeal" } } },
      },
    },
    {
      name = "your own wording is kept in every language",
      config = { plugins = { moderation = { rules = {
        { name = "invites", trigger = { keywords = { "discord.gg" } }, actions = { "block" }, message = "no invite links here" } } } } },
      steps = {
        { message = { cid = "lobby", text = "!lang zh-CN", from = "小明" } },
        { message = { text = "来 discord.gg/abc", from = "小明" }, expect = { verdict = "block", reason = "no invite links here" } },
      },
    },
  },
}
