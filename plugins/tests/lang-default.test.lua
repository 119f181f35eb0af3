-- A bot whose default language is Chinese (`[bot] locale = "zh-CN"` in hookbot.toml; `locale` here).

return {
  plugins = { "lang", "typing" },
  locale = "zh-CN",
  cases = {
    {
      name = "members who chose nothing read Chinese; one who chose English reads English",
      members = { c1 = { Tom = { locale = "en" } } },
      steps = {
        { message = { text = "/typing", from = "小明" }, expect = { replies = { "没有人在输入" } } },
        { message = { text = "!lang", from = "小明" },
          expect = { replies = { "你的语言：中文（zh-CN），是机器人的默认语言。可选：en, zh-CN；用 !lang <标签> 选择。" } } },
        { message = { text = "/typing", from = "Tom" }, expect = { replies = { "nobody is typing" } } },
        { message = { text = "!lang reset", from = "Tom" }, expect = { replies = { "好的，你的语言恢复为本会话的语言：中文（zh-CN）。" } } },
        { message = { text = "/typing", from = "Tom", attrs = { lang = "en-GB" } }, expect = { replies = { "nobody is typing" } } },
      },
    },
  },
}
