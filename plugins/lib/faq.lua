-- Sample FAQ for autoreply (`faq_module = "faq"`): an answer is given when
-- every key occurs in the message (case-insensitive). `answer_key` names the
-- answer in plugins/locales/autoreply/<locale>.toml, so each member reads it in
-- their language (`answer = "..."` would be the same text for everyone).
return {
  { keys = { "how", "install" }, answer_key = "faq.install" },
  { keys = { "怎么", "安装" }, answer_key = "faq.install" },
  { keys = { "plugin", "reload" }, answer_key = "faq.reload" },
  { keys = { "插件", "重新加载" }, answer_key = "faq.reload" },
  { keys = { "who", "are", "you" }, answer_key = "faq.who" },
  { keys = { "你是谁" }, answer_key = "faq.who" },
}
