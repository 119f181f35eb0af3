-- welcome.lua does not greet raiders: not during a join wave (its own count of self-joins), not while the
-- conversation is locked, not a joiner gatekeeper muted (raid mode, screening). With hold_seconds (2 in
-- hookbot.toml) the greeting waits until gatekeeper has acted. alice is a moderator.

local HOLD = { plugins = { gatekeeper = { moderators = { "alice" } }, welcome = { hold_seconds = 2 } } }

return {
  plugins = { "gatekeeper", "welcome" },
  config = { plugins = { gatekeeper = { moderators = { "alice" } } } },
  cases = {
    {
      name = "from the third self-join within 10 s nobody is greeted; after a quiet spell, again",
      steps = {
        { join = { members = { "Tom" }, by = "Tom" }, expect = { replies = { "Welcome, Tom!" } } },
        { advance = 1 },
        { join = { members = { "Jerry" }, by = "Jerry" }, expect = { replies = { "Welcome, Jerry!" } } },
        { advance = 1 },
        { join = { members = { "raider1" }, by = "raider1" }, expect = { replies = {} } },
        { advance = 1 },
        { join = { members = { "raider2" }, by = "raider2" }, expect = { replies = {} } },
        -- Members added by someone are no wave.
        { join = { members = { "Spike" }, by = "alice" }, expect = { replies = {} } },
        { advance = 15 },
        { join = { members = { "小明" }, by = "小明" }, expect = { replies = { "Welcome, 小明!" } } },
      },
    },
    {
      name = "a greeting waits hold_seconds; a joiner muted by raid mode meanwhile is not greeted",
      config = HOLD,
      steps = {
        { join = { members = { "Tom" }, by = "Tom" }, expect = { replies = {} } },
        { advance = 2, expect = { replies = { "Welcome, Tom!" } } },
        { message = { text = "!gate raid on", from = "alice" }, expect = { replies = { { match = "^raid mode on in c1" } } } },
        { join = { members = { "raider1" }, by = "raider1" },
          expect = { actions = { { kind = "mute", user = "raider1", seconds = 3600 } }, replies = {} } },
        { advance = 2, expect = { replies = {} } },
        { message = { text = "!gate raid off", from = "alice" } },
        { advance = 20 },
        { join = { members = { "小明" }, by = "小明" } },
        { advance = 2, expect = { replies = { "Welcome, 小明!" } } },
      },
    },
    {
      name = "nobody is greeted while the conversation is locked",
      config = HOLD,
      steps = {
        { message = { text = "!gate lock", from = "alice" }, expect = { actions = { { kind = "lock", cid = "c1" } } } },
        { join = { members = { "Tom" }, by = "alice" } },
        { advance = 2, expect = { replies = {} } },
        { message = { text = "!gate unlock", from = "alice" }, expect = { actions = { { kind = "unlock", cid = "c1" } } } },
        { join = { members = { "Jerry" }, by = "alice" } },
        { advance = 2, expect = { replies = { "Welcome, Jerry!" } } },
      },
    },
    {
      name = "a newcomer screened by gatekeeper gets the question, not a greeting, until the answer",
      config = { plugins = { gatekeeper = { screening = true, kinds = {}, questions = { { q = "2 + 2?", a = { "4" } } } },
                             welcome = { hold_seconds = 2 } } },
      steps = {
        { join = { members = { "Tom" }, by = "Tom" }, expect = { replies = { { cid = "dm:Tom", text = "To post in c1, answer: 2 + 2?" } } } },
        { advance = 2, expect = { replies = {} } },
      },
    },
  },
}
