-- Link cards (_lctype 3): a shared link shown with its title, summary and
-- image, like a news-sharing card. Members may post cards themselves; when a
-- plain text mentions a link the bot knows (the `cards` table stands in for a
-- preview service, since plugins have no network), the bot posts the card.

return {
  name = "linkcard",
  config = {
    type = 3,
    https_images_only = true,
    cards = {
      ["https://news.example/hookbot-1-0"] = {
        title = "Hookbot 1.0 released",
        summary = "A self-hosted IM hub with Lua plugins.",
        image = "https://news.example/img/hookbot.png",
      },
    },
  },

  on_load = function(ctx)
    ctx.types.register({ type = ctx.config.type, name = "link_card",
                         fields = { url = "string", title = "string", summary = "string?", image = "string?" } })
  end,

  moderation = function(msg, ctx)
    if msg.type_name ~= "link_card" then return nil end
    local ok, why = ctx.types.validate(msg)
    if not ok then return ctx.block("invalid link card: " .. why) end
    local image = msg.attrs.image
    if ctx.config.https_images_only and image and image:sub(1, 8) ~= "https://" then
      return ctx.block("link card images must use https")
    end
  end,

  on_receive = function(msg, ctx)
    if msg.type_name == "link_card" then
      local n = ctx.state.incr("shares:" .. msg.attrs.url)
      return ctx.reply(string.format("%s shared \"%s\" (shared %d time%s)", msg.from, msg.attrs.title, n, n == 1 and "" or "s"))
    end
    if msg.type ~= -1 or not msg.text then return end
    for url in msg.text:gmatch("https?://[%w%-%._~/%%%?=&#]+") do
      local card = ctx.config.cards[url]
      if card then
        ctx.reply(ctx.types.build("link_card",
          { url = url, title = card.title, summary = card.summary, image = card.image },
          { text = card.title }))
      end
    end
  end,
}
