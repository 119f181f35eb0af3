-- Two bots in one conversation, each running autoreply: each answers the other's reply, and the hop
-- marker every bot message carries ends the exchange at max_hops, as in a running deployment.

return {
  plugins = { "autoreply" },
  bot = "modbot",
  mode = "client",
  config = { cooldown = 0, rules = { { keyword = "ping", reply = "pong" } } },
  bots = {
    { id = "echobot", plugins = { "autoreply" },
      config = { cooldown = 0, rules = { { keyword = "pong", reply = "ping" } } } },
  },
  cases = {
    {
      name = "replies bounce between the bots until the hop limit",
      steps = {
        { message = "ping",
          expect = { replies = {
            { text = "pong", from = "modbot", hops = 1 },
            { text = "ping", from = "echobot", hops = 2 },
            { text = "pong", from = "modbot", hops = 3 },
          } } },
      },
    },
    {
      name = "a lower hop limit ends it sooner",
      steps = {
        { message = { text = "ping", attrs = { ["hookbot.hop"] = 1 } },
          expect = { replies = {
            { text = "pong", from = "modbot", hops = 2 },
            { text = "ping", from = "echobot", hops = 3 },
          } } },
      },
    },
    {
      name = "the interceptor reviews the other bot's messages too",
      mode = "interceptor",
      config = { plugins = { autoreply = { cooldown = 0, rules = { { keyword = "ping", reply = "pong" } } } } },
      steps = {
        { message = "ping", expect = { verdict = "allow", replies = { "pong", "ping", "pong" } } },
      },
    },
  },
}
