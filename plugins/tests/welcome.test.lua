-- Scenarios for plugins/welcome.lua. The runner's clock starts at 1700000000 (2023-11-14 UTC).

return {
  plugins = { "welcome" },
  cases = {
    {
      name = "greets each new member and remembers the first join",
      steps = {
        { join = { cid = "c1", members = { "Tom", "Jerry" }, by = "Spike" },
          expect = { replies = { { cid = "c1", text = "Welcome, Tom!" }, { cid = "c1", text = "Welcome, Jerry!" } } } },
        { expect_state = { ["conv:c1:first:Tom"] = 1700000000, ["conv:c1:joins:Tom"] = 1 } },
      },
    },
    {
      name = "founders of a new conversation are not greeted; a later joiner is",
      steps = {
        { join = { cid = "c1", members = { "Spike", "Tom", "Jerry" }, by = "Spike", founding = true },
          expect = { replies = {} } },
        { join = { cid = "c1", members = { "Tyke" }, by = "Tyke" }, expect = { replies = { "Welcome, Tyke!" } } },
        { expect_state = { ["conv:c1:first:Tom"] = NIL, ["conv:c1:first:Tyke"] = 1700000000 } },
      },
    },
    {
      name = "a returning member is welcomed back with the first-join date",
      steps = {
        { join = { members = { "Tom" } } },
        { advance = 86400 * 3 },
        { leave = { members = { "Tom" } }, expect = { replies = { "Goodbye, Tom." } } },
        { join = { members = { "Tom" } }, expect = { replies = { "Welcome back, Tom! You first joined on 2023-11-14." } } },
        { expect_state = { ["conv:c1:first:Tom"] = 1700000000, ["conv:c1:joins:Tom"] = 2 } },
      },
    },
    {
      name = "first joins are per conversation",
      steps = {
        { join = { cid = "c1", members = { "Tom" } } },
        { join = { cid = "c2", members = { "Tom" } }, expect = { replies = { { cid = "c2", text = "Welcome, Tom!" } } } },
      },
    },
    {
      name = "removal by someone else is announced differently",
      steps = {
        { leave = { members = { "Tom" }, by = "Spike" }, expect = { replies = { "Tom was removed by Spike." } } },
        { leave = { members = { "Jerry" }, by = "Jerry" }, expect = { replies = { "Goodbye, Jerry." } } },
      },
    },
    {
      name = "bots in skip are not greeted",
      config = { skip = { "modbot", "otherbot" } },
      steps = {
        { join = { members = { "otherbot", "Tom", "modbot" } }, expect = { replies = { "Welcome, Tom!" } } },
      },
    },
    {
      name = "custom templates and empty templates",
      config = { greeting = "{user} joined {conversation} (added by {by})", goodbye = "", removed = "" },
      steps = {
        { join = { cid = "room", members = { "Tom" }, by = "Jerry" }, expect = { replies = { "Tom joined room (added by Jerry)" } } },
        { leave = { cid = "room", members = { "Tom" }, by = "Jerry" }, expect = { replies = {} } },
        { leave = { cid = "room", members = { "Jerry" } }, expect = { replies = {} } },
      },
    },
    {
      name = "introduces itself when the bot is invited",
      steps = {
        { invited = { cid = "new", by = "Tom" }, expect = { replies = { { cid = "new", match = "^Hi! I am a bot" } } } },
      },
    },
    {
      name = "no introduction when intro is empty",
      config = { intro = "" },
      steps = { { invited = { cid = "new", by = "Tom" }, expect = { replies = {} } } },
    },
  },
}
