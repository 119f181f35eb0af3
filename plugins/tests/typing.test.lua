-- Scenarios for plugins/typing.lua: transient "operation" messages (_lctype 1).

local function typing(from, cid) return { transient = { type = "operation", text = "typing…", from = from or "Tom", cid = cid or "c1" } } end

return {
  plugins = { "typing" },
  cases = {
    {
      name = "a typing notification is remembered for ttl seconds",
      steps = {
        typing("Tom"),
        { message = { text = "/typing", from = "Jerry" }, expect = { replies = { "typing now: Tom" } } },
        { advance = 7 },
        { message = { text = "/typing", from = "Jerry" }, expect = { replies = { "nobody is typing" } } },
        { expect_state = { ["conv:c1:count:Tom"] = 1 } },
      },
    },
    {
      name = "sending the message clears the indicator",
      steps = {
        typing("Tom"), typing("Spike"),
        { message = "here it is" },
        { message = { text = "/typing", from = "Jerry" }, expect = { replies = { "typing now: Spike" } } },
      },
    },
    {
      name = "transient messages of other types are ignored, and never reach on_receive",
      steps = {
        { transient = { text = "typing…" }, expect = { replies = {}, transients = {} } },
        { message = { text = "/typing", from = "Jerry" }, expect = { replies = { "nobody is typing" } } },
      },
    },
    {
      name = "announce relays one transient operation message per burst",
      config = { announce = true },
      steps = {
        { transient = { type = "operation", text = "typing…" }, expect = { transients = { "Tom is typing…" } } },
        { transient = { type = 1, text = "typing…" },
          expect = { transients = {}, replies = {} } },
        { advance = 7 },
        { transient = { type = "operation", text = "typing…", cid = "c2" },
          expect = { transients = { { cid = "c2", type = "operation", text = "Tom is typing…", attrs = { op = "typing" } } }, replies = {} } },
      },
    },
    {
      name = "a custom announce text and type number",
      config = { announce = true, announce_text = "✍ {user}", type = 5 },
      steps = {
        { transient = { type = 5, from = "Jerry" }, expect = { transients = { { type = "operation", text = "✍ Jerry" } } } },
        { transient = { type = 1, from = "Tom" }, expect = { transients = {} } },
      },
    },
    {
      name = "in Chinese: a member whose app says attrs.lang = zh-CN, and a conversation set to Chinese",
      config = { announce = true },
      steps = {
        typing("小明"), typing("Spike"),
        { message = { text = "/typing", from = "小红", attrs = { lang = "zh-CN" } }, expect = { replies = { "正在输入：Spike、小明" } } },
        { message = { text = "/typing", from = "Jerry" }, expect = { replies = { "typing now: Spike, 小明" } } },
        { advance = 7 },
        { message = { text = "/typing", from = "小红", attrs = { lang = "zh-CN" } }, expect = { replies = { "没有人在输入" } } },
        -- the relay speaks the conversation's language (what `!lang here zh-CN` of lang.lua stores)
        { set_state = { plugin = "hookbot.locale", ["conv:c1"] = "zh-CN" } },
        { transient = { type = "operation", text = "typing…", from = "小明" }, expect = { transients = { "小明 正在输入…" } } },
      },
    },
  },
}
