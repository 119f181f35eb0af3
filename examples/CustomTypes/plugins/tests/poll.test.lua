-- Scenarios for the poll example plugin (custom type "poll", _lctype 2): each poll is answered with a
-- card (_lctype 100) whose buttons vote; the card is updated in place (an edit) as votes come.

local function poll(question, options, from)
  return { message = { type = "poll", text = "Poll: " .. question, from = from or "Tom",
                       attrs = { question = question, options = options } } }
end

local function with(step, expect) step.expect = expect; return step end

-- The card edit a step must make: its text and the buttons' labels.
local function edited(text, labels)
  local buttons = {}
  for i, label in ipairs(labels) do buttons[i] = { label = label } end
  return { actions = { { kind = "edit", card = { text = text, buttons = buttons } } } }
end

return {
  plugins = { "poll" },
  cases = {
    {
      name = "a poll is answered with a card; clicks vote and update it in place",
      steps = {
        with(poll("午饭 Lunch? 🍱", { "Pizza", "寿司" }), { verdict = "allow", replies = { {
          type = "card", text = "午饭 Lunch? 🍱\n0 votes\nby: Tom\n[Pizza · 0] [寿司 · 0]",
          attrs = { card = { title = "午饭 Lunch? 🍱", fields = { { name = "by", value = "Tom", inline = true } },
                             buttons = { { label = "Pizza · 0", value = "1", style = "primary" },
                                         { label = "寿司 · 0", value = "2", style = "primary" } } } } } } }),
        { click = { value = "1" }, expect = edited("1 vote", { "Pizza · 1", "寿司 · 0" }) },
        { click = { value = "2", from = "Jerry" }, expect = edited("2 votes", { "Pizza · 1", "寿司 · 1" }) },
        -- One vote per member: Jerry's second click moves his vote; the same click again changes nothing.
        { click = { value = "1", from = "Jerry" }, expect = edited("2 votes", { "Pizza · 2", "寿司 · 0" }) },
        { click = { value = "1", from = "Jerry" }, expect = { actions = {}, replies = {} } },
        { expect_state = { ["conv:c1:vote:Jerry"] = 1, ["conv:c1:poll"] = { question = "午饭 Lunch? 🍱", by = "Tom" } } },
        { message = { text = "/vote 2", from = "Spike" }, expect = edited("3 votes", { "Pizza · 2", "寿司 · 1" }) },
        { message = { text = "/poll", from = "Spike" }, expect = { replies = { "午饭 Lunch? 🍱 Pizza 2, 寿司 1 (3 votes)" } } },
      },
    },
    {
      name = "forged clicks are refused and never vote",
      steps = {
        poll("Tea?", { "Yes", "No" }),
        { click = { value = "1", from = "Jerry", token = "AAAAAAAAAAAAAAAAAAAAAA" },
          expect = { actions = {}, logs = { "card click refused: Jerry in c1: the token does not match" } } },
        { click = { value = "2", from = "Jerry", cid = "c2" },
          expect = { actions = {}, logs = { "card click refused: Jerry in c2: card" } } },
        { expect_state = { ["conv:c1:vote:Jerry"] = NIL } },
      },
    },
    {
      name = "bad votes",
      steps = {
        { message = "/vote 1", expect = { replies = { "there is no open poll" } } },
        poll("Tea?", { "Yes", "No" }),
        { message = "/vote 3", expect = { replies = { "choose an option from 1 to 2" } } },
        { message = "/vote one", expect = { replies = {}, actions = {} } },
      },
    },
    {
      name = "only the author closes a poll; its card is disabled; a new poll resets the votes",
      steps = {
        poll("Lunch?", { "Pizza", "Sushi" }),
        { click = { value = "2" } },
        { message = { text = "/poll close", from = "Jerry" }, expect = { replies = { "only Tom can close this poll" } } },
        { message = "/poll close", expect = {
          replies = { "Final: Lunch? Pizza 0, Sushi 1 (1 vote)" },
          actions = { { kind = "edit", card = { text = "Final: 1 vote",
            buttons = { { label = "Pizza · 0", disabled = true }, { label = "Sushi · 1", disabled = true } } } } } } },
        { click = { value = "1", from = "Jerry" }, expect = { actions = {}, logs = { "card click refused: Jerry in c1:" } } },
        { message = "/poll", expect = { replies = { "there is no open poll" } } },
        poll("Dinner?", { "Soup", "Salad", "Steak" }, "Jerry"),
        { message = "/vote 3", expect = edited("1 vote", { "Soup · 0", "Salad · 0", "Steak · 1" }) },
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
