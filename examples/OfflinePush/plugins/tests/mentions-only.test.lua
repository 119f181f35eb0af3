-- Scenarios for examples/OfflinePush/plugins/mentions-only.lua: `offline` steps
-- feed a stored message's offline receivers to on_offline; `pushes` is what each
-- receiver gets (false: no push; a table: fields its notification must have).

local function members(n)
  local list = {}
  for i = 1, n do list[i] = "m" .. i end
  return list
end

return {
  plugins = { "mentions-only" },
  config = { big_group = 3 },
  cases = {
    {
      name = "a small group keeps the default push for everyone",
      steps = {
        { offline = { message = "lunch?", receivers = { "Jerry", "Spike" } },
          expect = { pushes = { Jerry = { title = "c1", body = "Tom: lunch?" }, Spike = { body = "Tom: lunch?" } } } },
      },
    },
    {
      name = "in a big group only the mentioned members get a push, titled for them",
      steps = {
        { offline = { message = "@Jerry the cheese is yours", receivers = { "Jerry", "Spike", "Tyke" }, mentions = { "Jerry" } },
          expect = { pushes = {
            Jerry = { title = "Tom mentioned you", body = "Tom: @Jerry the cheese is yours",
                      data = { mention = true, cid = "c1", from = "Tom" } },
            Spike = false, Tyke = false } } },
      },
    },
    {
      name = "a message to everyone (@all) reaches every member",
      steps = {
        { offline = { message = "@all dinner", receivers = members(5), mentions = true },
          expect = { pushes = { m1 = true, m2 = true, m3 = true, m4 = true, m5 = { title = "Tom mentioned you" } } } },
      },
    },
    {
      name = "nobody mentioned in a big group: no push at all",
      config = { big_group = 2 },
      steps = {
        { offline = { message = "chatter", receivers = { "Jerry", "Spike" } },
          expect = { pushes = { Jerry = false, Spike = false } } },
      },
    },
  },
}
