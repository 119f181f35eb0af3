-- Scenarios for the poll example plugin (custom type "poll", _lctype 2).

local function poll(question, options, from)
  return { message = { type = "poll", text = "Poll: " .. question, from = from or "Tom",
                       attrs = { question = question, options = options } } }
end

local function with(step, expect) step.expect = expect; return step end

return {
  plugins = { "poll" },
  cases = {
    {
      name = "a poll is announced and votes are tallied in state",
      steps = {
        with(poll("Lunch?", { "Pizza", "Sushi" }), { verdict = "allow",
          replies = { "Poll by Tom: Lunch? 1) Pizza 2) Sushi - vote with /vote N" } }),
        { message = "/vote 1", expect = { replies = { { text = "Lunch? Pizza 1, Sushi 0 (1 vote)", attrs = { poll = "m1", counts = { 1, 0 } } } } } },
        { message = { text = "/vote 2", from = "Jerry" }, expect = { replies = { "Lunch? Pizza 1, Sushi 1 (2 votes)" } } },
        { message = { text = "/vote 1", from = "Jerry" }, expect = { replies = { "Lunch? Pizza 2, Sushi 0 (2 votes)" } } },
        { expect_state = { ["conv:c1:vote:Jerry"] = 1, ["conv:c1:poll"] = { question = "Lunch?", by = "Tom" } } },
        { message = { text = "/poll", from = "Spike" }, expect = { replies = { "Lunch? Pizza 2, Sushi 0 (2 votes)" } } },
      },
    },
    {
      name = "bad votes",
      steps = {
        { message = "/vote 1", expect = { replies = { "there is no open poll" } } },
        poll("Tea?", { "Yes", "No" }),
        { message = "/vote 3", expect = { replies = { "choose an option from 1 to 2" } } },
        { message = "/vote one", expect = { replies = {} } },
      },
    },
    {
      name = "only the author closes a poll; a new poll resets the votes",
      steps = {
        poll("Lunch?", { "Pizza", "Sushi" }),
        { message = "/vote 2" },
        { message = { text = "/poll close", from = "Jerry" }, expect = { replies = { "only Tom can close this poll" } } },
        { message = "/poll close", expect = { replies = { "Final: Lunch? Pizza 0, Sushi 1 (1 vote)" } } },
        { message = "/poll", expect = { replies = { "there is no open poll" } } },
        poll("Dinner?", { "Soup", "Salad", "Steak" }, "Jerry"),
        { message = "/vote 3", expect = { replies = { "Dinner? Soup 0, Salad 0, Steak 1 (1 vote)" } } },
      },
    },
    {
      name = "malformed polls are blocked by moderation",
      steps = {
        with(poll("Only one?", { "Yes" }), { verdict = "block", reason = "a poll needs 2 to 10 options", replies = {} }),
        { message = { type = "poll", attrs = { question = "No options" } },
          expect = { verdict = "block", reason = "invalid poll: poll: missing field 'options'" } },
        { message = { type = 2, attrs = { question = 42, options = { "a", "b" } } },
          expect = { verdict = "block", reason = "invalid poll: poll: field 'question' must be string" } },
      },
    },
  },
}
