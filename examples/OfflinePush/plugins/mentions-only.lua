-- Offline push in big groups: only the members a message mentions get a push
-- ("Tom mentioned you"); a message that mentions everyone (@all) reaches all
-- of them. Smaller groups keep the server's default push for everyone.
-- The on_offline hook (docs/PUSH.md, "on_offline") runs on the bot host for
-- each stored message whose receivers are offline with a push device.

return {
  name = "mentions-only",
  config = {
    big_group = 20,                  -- from this many offline receivers on, only mentions are pushed
    title = "{from} mentioned you",  -- the title of a mention's push ({from}, {conversation})
  },

  on_offline = function(msg, receivers, ctx)
    if #receivers < ctx.config.big_group then return nil end   -- nil: the defaults for everyone
    local title = ctx.config.title:gsub("{from}", msg.from):gsub("{conversation}", msg.cid)
    local decided = {}
    for _, receiver in ipairs(receivers) do
      if receiver.mentioned then
        decided[receiver.id] = { title = title, data = { mention = true } }   -- merged over the default
      else
        decided[receiver.id] = false                                          -- no push
      end
    end
    return decided
  end,
}
