-- Scenarios for plugins/autoreply.lua.

return {
  plugins = { "autoreply" },
  config = {
    rules = {
      { exact = "ping", reply = "pong" },
      { keyword = "hello", reply = "hi {from}, welcome to {conversation}" },
      { pattern = "^weather in (%a+) on (%a+)", reply = "no forecast for {1} on {2}, {from}", name = "weather" },
      { keyword = "deploy", reply = "ask @ops", mention = true },
    },
    cooldown = 30,
  },
  cases = {
    {
      -- Trimming is linear: a pattern like "^%s*(.-)%s*$" took seconds here and ran past the deadline.
      name = "long runs of spaces are handled in linear time",
      steps = {
        { message = "a" .. string.rep(" ", 60000) .. "b", expect = { replies = {} } },
        { message = string.rep(" ", 60000) .. "PING" .. string.rep(" ", 60000),
          expect = { replies = { "pong" } } },
      },
    },
    {
      name = "exact rules ignore case and surrounding spaces only",
      steps = {
        { message = "  PING ", expect = { replies = { { cid = "c1", text = "pong", reply_to = "m1" } } } },
        { message = { text = "ping", cid = "c2" }, expect = { replies = { { cid = "c2", text = "pong" } } } },
        { message = "ping please", expect = { replies = {} } },
      },
    },
    {
      name = "keywords match whole words with {from} and {conversation}",
      steps = {
        { message = { text = "Hello, everyone!", from = "Jerry", cid = "kitchen" },
          expect = { replies = { "hi Jerry, welcome to kitchen" } } },
        { message = { text = "othello is a play", cid = "c9" }, expect = { replies = {} } },
      },
    },
    {
      name = "pattern captures fill {1} and {2}",
      steps = {
        { message = "weather in Paris on Monday", expect = { replies = { "no forecast for Paris on Monday, Tom" } } },
        { expect_state = { ["conv:c1:answered:weather"] = 1 } },
      },
    },
    {
      name = "unknown placeholders stay as they are",
      config = { rules = { { exact = "x", reply = "{nope} {from}" } } },
      steps = { { message = "x", expect = { replies = { "{nope} Tom" } } } },
    },
    {
      name = "cooldown per rule and conversation",
      steps = {
        { message = "ping", expect = { replies = { "pong" } } },
        { message = "ping", expect = { replies = {} } },
        { message = "hello", expect = { replies = { { match = "^hi Tom" } } } },
        { message = { text = "ping", cid = "c2" }, expect = { replies = { "pong" } } },
        { advance = 31 },
        { message = "ping", expect = { replies = { "pong" } } },
      },
    },
    {
      -- The operator put a new rule first; "ping" had been the first rule and was cooling down.
      name = "cooldowns follow the rule, not its position",
      config = { rules = { { exact = "new", reply = "new!" }, { exact = "ping", reply = "pong" } } },
      steps = {
        { set_state = { ["conv:c1:cooldown:rule1"] = true, ["conv:c1:cooldown:exact:ping"] = true } },
        { message = "new", expect = { replies = { "new!" } } },
        { message = "ping", expect = { replies = {} } },
        { expect_state = { ["conv:c1:answered:exact:new"] = 1 } },
      },
    },
    {
      name = "a rule's own cooldown, and no cooldown at all",
      config = { cooldown = 0, rules = { { exact = "ping", reply = "pong" }, { exact = "slow", reply = "ok", cooldown = 5 } } },
      steps = {
        { message = "ping", expect = { replies = { "pong" } } },
        { message = "ping", expect = { replies = { "pong" } } },
        { message = "slow", expect = { replies = { "ok" } } },
        { message = "slow", expect = { replies = {} } },
        { advance = 6 },
        { message = "slow", expect = { replies = { "ok" } } },
      },
    },
    {
      name = "mention-only rules need @bot, which is removed before matching",
      steps = {
        { message = "deploy now", expect = { replies = {} } },
        { message = "@modbot deploy now", expect = { replies = { "ask @ops" } } },
        { message = "@MODBOT ping", expect = { replies = { "pong" } } },
      },
    },
    {
      name = "only_when_mentioned applies to every rule and the FAQ",
      config = { only_when_mentioned = true, faq = { { keys = { "opening", "hours" }, answer = "9 to 5" } } },
      steps = {
        { message = "ping", expect = { replies = {} } },
        { message = "what are the opening hours?", expect = { replies = {} } },
        { message = "ping @modbot", expect = { replies = { "pong" } } },
        { message = "@modbot opening hours?", expect = { replies = { "9 to 5" } } },
      },
    },
    {
      name = "a configurable bot name",
      config = { bot = "helper", only_when_mentioned = true },
      steps = {
        { message = "@modbot ping", expect = { replies = {} } },
        { message = "@helper ping", expect = { replies = { "pong" } } },
      },
    },
    {
      name = "inline FAQ entries answer when all keys occur",
      config = { faq = { { keys = { "opening", "hours" }, answer = "We are open 9 to 5, {from}." } } },
      steps = {
        { message = "What are your OPENING hours?", expect = { replies = { "We are open 9 to 5, Tom." } } },
        { message = "are you opening soon?", expect = { replies = {} } },
      },
    },
    {
      name = "the FAQ module from lib/ (faq_module)",
      config = { faq_module = "faq" },
      steps = {
        { message = "how do I install this?", expect = { replies = { { match = "^Run `make build`" } } } },
        { message = { text = "who are you", cid = "lobby" }, expect = { replies = { "I am lobby's bot; my behaviour lives in plugins/*.lua." } } },
      },
    },
    {
      name = "in Chinese: the default ping rule and the FAQ answer a member whose app says zh-CN in Chinese",
      config = { faq_module = "faq", rules = { { exact = "ping", reply_key = "pong" } } },
      steps = {
        { message = { text = "ping", from = "小明", attrs = { lang = "zh-CN" } }, expect = { replies = { "pong，小明！" } } },
        { message = { text = "ping", from = "Tom", cid = "c2" }, expect = { replies = { { cid = "c2", text = "pong, Tom!" } } } },
        { message = { text = "请问怎么安装？", from = "小明", attrs = { lang = "zh-CN" } },
          expect = { replies = { { match = "^先运行 `make build`" } } } },
        { message = { text = "你是谁", from = "小红", cid = "大厅", attrs = { lang = "zh-CN" } },
          expect = { replies = { { cid = "大厅", text = "我是 大厅 的机器人；我的行为写在 plugins/*.lua 里。" } } } },
        -- an English member asking in Chinese reads the English answer (the member's language, not the text's)
        { message = { text = "插件 怎么 重新加载", from = "Tom" }, expect = { replies = { { match = "^Plugins reload by themselves" } } } },
      },
    },
    {
      name = "a reply_key that no locale file has answers with the key itself (never an error)",
      config = { rules = { { pattern = "^say (%a+)", reply_key = "missing.key" } } },
      steps = { { message = "say hi", expect = { replies = { "missing.key" } } } },
    },
    {
      name = "rules come before the FAQ and the first matching rule wins",
      config = { faq = { { keys = { "ping" }, answer = "faq ping" } },
                 rules = { { keyword = "ping", reply = "first" }, { exact = "ping", reply = "second" } } },
      steps = { { message = "ping", expect = { replies = { "first" } } } },
    },
    {
      name = "a rule on cooldown lets later rules answer nothing",
      steps = {
        { message = "ping", expect = { replies = { "pong" } } },
        { message = "ping", expect = { replies = {} } },
      },
    },
    {
      name = "non-text messages and the bot's own messages are ignored",
      steps = {
        { message = { text = "ping", type = "image", file = { url = "https://x/y.png" } }, expect = { replies = {} } },
        { message = { text = "ping", from = "modbot" }, expect = { verdict = "ignored", replies = {} } },
      },
    },
    {
      name = "bot replies carry hop counts: a message two bot hops deep is not answered",
      steps = {
        { message = { text = "ping", attrs = { ["hookbot.hop"] = 2 } }, expect = { replies = { "pong" } } },
        { message = { text = "hello", attrs = { ["hookbot.hop"] = 3 } }, expect = { ignored = true, replies = {} } },
      },
    },
  },
}
