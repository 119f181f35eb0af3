-- Scenarios for setup.lua: answers are ordinary message steps from the member; `advance` moves the
-- virtual clock past a question's timeout.
return {
  plugins = { "setup" },
  cases = {
    {
      name = "walks through the questions, re-asks invalid answers, saves on yes",
      steps = {
        { message = "!setup", expect = { replies = { "What should I call you?" } } },
        { message = "小明", expect = { replies = { "Hi 小明! Which city are you in?" } } },
        -- another member talks meanwhile: not an answer to Tom's dialog
        { message = { text = "!profile", from = "Jerry" }, expect = { replies = { "No profile yet: type !setup." } } },
        { message = "上海 🌆", expect = { replies = { "Language: en or zh?" } } },
        { message = "french", expect = { replies = { "Please answer en or zh. Language: en or zh?" } } },
        { message = "ZH", expect = { replies = { "Save 小明, 上海 🌆, 中文? (yes/no)" } } },
        { message = "是", expect = { replies = { "Saved: 小明, 上海 🌆, 中文." } } },
        { expect_state = { ["user:Tom:profile"] = { name = "小明", city = "上海 🌆", lang = "zh" } } },
        { message = "!profile", expect = { replies = { "小明, 上海 🌆, 中文" } } },
      },
    },
    {
      name = "cancel words and timeouts stop it",
      steps = {
        { message = "!setup", expect = { replies = { "What should I call you?" } } },
        { message = "取消", expect = { replies = { "Setup cancelled." } } },
        { message = "!setup", expect = { replies = { "What should I call you?" } } },
        { message = "Tom", expect = { replies = { "Hi Tom! Which city are you in?" } } },
        { advance = 59, expect = { replies = {} } },
        { advance = 1, expect = { replies = { "Setup stopped: no answer for a minute. Type !setup to start again." } } },
        { message = "Paris", expect = { replies = {} } },
        { expect_state = { ["user:Tom:profile"] = NIL } },
      },
    },
    {
      name = "a command typed as an answer runs; !setup again restarts",
      steps = {
        { message = "!setup", expect = { replies = { "What should I call you?" } } },
        { message = "!profile", expect = { replies = { "No profile yet: type !setup." } } },
        { message = "!setup", expect = { replies = { "What should I call you?", "Setup restarted." } } },
        { message = "Lily", expect = { replies = { "Hi Lily! Which city are you in?" } } },
      },
    },
  },
}
