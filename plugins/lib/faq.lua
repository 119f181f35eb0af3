-- Sample FAQ for autoreply (`faq_module = "faq"`): an answer is given when
-- every key occurs in the message (case-insensitive).
return {
  { keys = { "how", "install" }, answer = "Run `make build`, then `swift run hookbot run`; see the README quick start." },
  { keys = { "plugin", "reload" }, answer = "Plugins reload by themselves when you save the file, or with `swift run hookbot reload`." },
  { keys = { "who", "are", "you" }, answer = "I am {conversation}'s bot; my behaviour lives in plugins/*.lua." },
}
