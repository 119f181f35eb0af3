-- The shipped plugins together, as `hookbot run` loads them: moderation (priority 100) decides
-- before the others see a message, and the bot's own replies pass through moderation too.

return {
  plugins = { "moderation", "autoreply", "translate", "welcome", "typing" },
  config = { plugins = {
    moderation = { words = { "scam" }, moderators = { "Mod" } },
    autoreply = { rules = { { keyword = "scam", reply = "what scam?" }, { exact = "ping", reply = "pong" } } },
  } },
  cases = {
    {
      name = "a blocked message reaches no other plugin",
      steps = {
        { message = "is this a scam", expect = { verdict = "block", replies = { "@Tom please mind your language" } } },
        { message = "ping", expect = { verdict = "allow", replies = { "pong" } } },
      },
    },
    {
      name = "the bot's own replies go through moderation, where the bot is exempt by default",
      config = { plugins = { autoreply = { rules = { { exact = "say it", reply = "scam" } } } } },
      steps = {
        { message = "say it", expect = { replies = { "scam" }, dropped = {} } },
        { expect_state = { ["conv:c1:strikes:modbot"] = NIL } },
      },
    },
    {
      name = "the bot's own id (ctx.bot) stays exempt even with an empty exempt list",
      config = { plugins = { moderation = { exempt = {} }, autoreply = { rules = { { exact = "say it", reply = "scam" } } } } },
      steps = {
        { message = "say it", expect = { replies = { "scam" }, actions = {} } },
      },
    },
    {
      name = "a kick is followed by the members-left event, so welcome says who removed whom",
      config = { plugins = { moderation = { words = { "scam" }, ladder = { "kick" } } } },
      steps = {
        { message = "scam", expect = { actions = { { kind = "kick", user = "Tom" } },
                                       replies = { "Tom was removed by modbot." } } },
        { join = { members = { "Tom" }, by = "Jerry" },
          expect = { actions = { { kind = "kick", reason = "banned" } },
                     replies = { "Welcome, Tom!", "Tom was removed by modbot." } } },
      },
    },
    {
      name = "translation, auto-replies and typing side by side",
      translate_to = { c1 = "zh" },
      steps = {
        { transient = { type = "operation", text = "typing…" } },
        { message = "ping", expect = { replies = { "pong" } } },
        { message = "thank you", expect = { replies = { "Tom (zh): 谢谢" } } },
        { message = { text = "/typing", from = "Jerry" }, expect = { replies = { "nobody is typing" } } },
      },
    },
  },
}
