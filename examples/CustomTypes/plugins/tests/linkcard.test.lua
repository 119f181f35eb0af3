-- Scenarios for the link-card example plugin (custom type "link_card", _lctype 3).

local card = { url = "https://news.example/hookbot-1-0", title = "Hookbot 1.0 released",
               summary = "A self-hosted IM hub with Lua plugins.", image = "https://news.example/img/hookbot.png" }

return {
  plugins = { "linkcard" },
  cases = {
    {
      name = "a known link in a text gets a card",
      steps = {
        { message = "have you read https://news.example/hookbot-1-0 yet?",
          expect = { replies = { { type = "link_card", text = "Hookbot 1.0 released", attrs = card } } } },
        { message = "https://unknown.example/x", expect = { replies = {} } },
      },
    },
    {
      name = "shared cards are counted",
      steps = {
        { message = { type = "link_card", text = card.title, attrs = card, from = "Jerry" },
          expect = { verdict = "allow", replies = { "Jerry shared \"Hookbot 1.0 released\" (shared 1 time)" } } },
        { message = { type = "link_card", attrs = { url = card.url, title = "again" } },
          expect = { replies = { "Tom shared \"again\" (shared 2 times)" } } },
        { expect_state = { ["shares:https://news.example/hookbot-1-0"] = 2 } },
      },
    },
    {
      name = "invalid cards and plain-http images are blocked",
      steps = {
        { message = { type = "link_card", attrs = { url = "https://x" } },
          expect = { verdict = "block", reason = "invalid link card: link_card: missing field 'title'" } },
        { message = { type = "link_card", attrs = { url = "https://x", title = "t", image = "http://x/i.png" } },
          expect = { verdict = "block", reason = "link card images must use https" } },
      },
    },
    {
      name = "http images can be allowed, and cards configured",
      config = { https_images_only = false, cards = { ["https://a.example/1"] = { title = "A" } } },
      steps = {
        { message = { type = "link_card", attrs = { url = "https://x", title = "t", image = "http://x/i.png" } },
          expect = { verdict = "allow" } },
        { message = "see https://a.example/1", expect = { replies = { { type = "link_card", attrs = { title = "A", url = "https://a.example/1" } } } } },
      },
    },
  },
}
