-- Scenarios for plugins/translate.lua (offline en <-> zh phrase table).

return {
  plugins = { "translate" },
  cases = {
    {
      name = "the provider translates whole phrases both ways",
      steps = {
        { translate = { text = "Good morning!", to = "zh" }, expect = { translation = "早上好！" } },
        { translate = { text = "谢谢", to = "en" }, expect = { translation = "Thank you" } },
        { translate = { text = "你好吗？", from = "zh", to = "en" }, expect = { translation = "How are you?" } },
      },
    },
    {
      name = "longer texts are assembled from the longest known phrases",
      steps = {
        { translate = { text = "good morning, see you tomorrow", to = "zh" }, expect = { translation = "早上好明天见" } },
        { translate = { text = "我喜欢猫", to = "en" }, expect = { translation = "I like cat" } },
      },
    },
    {
      name = "unknown words, unsupported languages and same-language requests give nil",
      steps = {
        { translate = { text = "hello quantum chromodynamics", to = "zh" }, expect = { translation = NIL } },
        { translate = { text = "hello", to = "fr" }, expect = { translation = NIL } },
        { translate = { text = "hello", to = "en" }, expect = { translation = NIL } },
        { translate = { text = "   ", to = "zh" }, expect = { translation = NIL } },
      },
    },
    {
      name = "extra phrases from config",
      config = { phrases = { { "hookbot", "钩子机器人" } } },
      steps = { { translate = { text = "hello hookbot", to = "zh" }, expect = { translation = "你好钩子机器人" } } },
    },
    {
      name = "host translation (translate_to) is put in attrs and answered",
      translate_to = { c1 = "zh" },
      steps = {
        { message = { text = "Thank you!", from = "Jerry" },
          expect = { translation = "谢谢！", replies = { "Jerry (zh): 谢谢！" } } },
        { message = { text = "untranslatable gibberish" }, expect = { replies = {} } },
      },
    },
    {
      name = "a message can ask for a translation itself (attrs.translate)",
      steps = {
        { message = { text = "晚安", attrs = { translate = "en" } }, expect = { replies = { "Tom (en): Good night" } } },
      },
    },
    {
      name = "host translations can be left to other plugins",
      translate_to = { c1 = "zh" },
      config = { reply_host_translations = false },
      steps = { { message = "hello", expect = { translation = "你好", replies = {} } } },
    },
    {
      name = "/translate turns auto-translation on and off per conversation",
      steps = {
        { message = "/translate", expect = { replies = { "auto-translation is off" } } },
        { message = "/translate zh", expect = { replies = { "auto-translation to zh is on" } } },
        { message = { text = "Good night", from = "Jerry" }, expect = { replies = { "Jerry (zh): 晚安" } } },
        { message = "晚安", expect = { replies = {} } },
        { message = { text = "Good night", cid = "c2" }, expect = { replies = {} } },
        { message = "/translate", expect = { replies = { "auto-translation to zh is on" } } },
        { message = "/translate off", expect = { replies = { "auto-translation is off" } } },
        { message = "Good night", expect = { replies = {} } },
      },
    },
    {
      name = "auto-translation from config, overridden by /translate off",
      config = { auto = { c1 = "en" } },
      steps = {
        { message = "会议取消了", expect = { replies = { "Tom (en): The meeting is cancelled" } } },
        { message = "/translate off" },
        { message = "会议取消了", expect = { replies = {} } },
      },
    },
    {
      name = "one-off translations and errors",
      steps = {
        { message = "/translate zh nice to meet you", expect = { replies = { "很高兴认识你" } } },
        { message = "/translate en 不客气", expect = { replies = { "You are welcome" } } },
        { message = "/translate zh flux capacitor", expect = { replies = { "no translation for: flux capacitor" } } },
        { message = "/translate fr", expect = { replies = { "unknown language fr (en, zh)" } } },
      },
    },
    {
      name = "results are cached per message id and language",
      steps = {
        { message = "/translate zh" },
        { message = { id = "msg-1", text = "coffee" }, expect = { replies = { "Tom (zh): 咖啡" } } },
        { expect_state = { ["cache:msg-1:zh"] = "咖啡" } },
        { advance = 86401 },
        { expect_state = { ["cache:msg-1:zh"] = NIL } },
        { set_state = { ["cache:msg-1:zh"] = "（缓存）" } },
        { message = { id = "msg-1", text = "coffee" }, expect = { replies = { "Tom (zh): （缓存）" } } },
      },
    },
    {
      name = "the host's cache answers repeated requests for a message id",
      steps = {
        { translate = { id = "m-9", text = "tea", to = "zh" }, expect = { translation = "茶" } },
        { translate = { id = "m-9", text = "something else", to = "zh" }, expect = { translation = "茶" } },
      },
    },
    {
      name = "the translate cmd message",
      steps = {
        { cmd = { action = "translate", ext = { lang = "zh" } }, expect = { replies = { "auto-translation to zh is on" } } },
        { cmd = { action = "translate", ext = { lang = "en", text = "再见" } }, expect = { replies = { "Goodbye" } } },
        { cmd = { action = "other" }, expect = { replies = {} } },
      },
    },
    {
      name = "commands and non-text messages are not translated",
      config = { auto = { c1 = "zh" } },
      steps = {
        { message = "/help", expect = { replies = {} } },
        { message = { type = "image", text = "cat", file = { url = "https://x/cat.png" } }, expect = { replies = {} } },
      },
    },
    {
      -- ctx.http answered from recordings: the service's reply is what the bot says, and the body the
      -- plugin posted is checked; a failing service falls back to the phrase table.
      name = "with api_url, auto-translation asks the service and falls back to the phrases",
      config = { auto = { c1 = "zh" }, api_url = "https://translate.example.org/translate", api_key = "k1" },
      http = {
        ["POST https://translate.example.org/translate"] = { status = 200, body = { translatedText = "服务说你好" } },
      },
      steps = {
        { message = { text = "hello there", from = "Jerry" },
          expect = { replies = { "Jerry (zh): 服务说你好" },
                     http = { { method = "POST", url = "https://translate.example.org/translate",
                                json = { q = "hello there", target = "zh", api_key = "k1" }, status = 200 } } } },
      },
    },
    {
      name = "a service that times out leaves the phrase table's answer",
      config = { auto = { c1 = "zh" }, api_url = "https://translate.example.org/translate" },
      http = { ["POST https://translate.example.org/translate"] = { error = "timeout: no answer within 10 s" } },
      steps = {
        { message = { text = "thank you", from = "Jerry" },
          expect = { replies = { "Jerry (zh): 谢谢" }, logs = { "translation service failed (timeout" },
                     http = { { error = "timeout: no answer within 10 s" } } } },
      },
    },
    {
      name = "a host that is not recorded is not in the allow-list",
      config = { auto = { c1 = "zh" }, api_url = "https://elsewhere.example.org/translate" },
      http = { ["POST https://translate.example.org/translate"] = { status = 200, body = { translatedText = "x" } } },
      steps = {
        { message = { text = "thank you", from = "Jerry" },
          expect = { replies = { "Jerry (zh): 谢谢" }, http = {},
                     logs = { "not in this plugin's allowed hosts" } } },
      },
    },
    {
      name = "in Chinese: /translate answers a member whose app says zh-CN in Chinese; a Chinese conversation's format",
      steps = {
        { message = { text = "/translate", from = "小明", attrs = { lang = "zh-CN" } }, expect = { replies = { "自动翻译已关闭" } } },
        { message = { text = "/translate en", from = "小明", attrs = { lang = "zh-CN" } },
          expect = { replies = { "已开启自动翻译，译为 en" } } },
        { message = { text = "/translate", from = "Tom" }, expect = { replies = { "auto-translation to en is on" } } },
        { message = { text = "/translate fr", from = "小明", attrs = { lang = "zh-CN" } },
          expect = { replies = { "不认识的语言 fr（可用：en, zh）" } } },
        { message = { text = "/translate zh 量子", from = "小明", attrs = { lang = "zh-CN" } },
          expect = { replies = { "没有这句话的翻译：量子" } } },
        { message = { text = "谢谢", from = "小明", attrs = { lang = "zh-CN" } }, expect = { replies = { "小明 (en): Thank you" } } },
        -- the conversation is Chinese (lang.lua's `!lang here zh-CN`): the posted translations follow it
        { set_state = { plugin = "hookbot.locale", ["conv:c1"] = "zh-CN" } },
        { message = { text = "晚安", from = "小明" }, expect = { replies = { "小明（en）：Good night" } } },
      },
    },
  },
}
