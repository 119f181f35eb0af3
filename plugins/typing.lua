-- Typing indicators: the "operation" custom type (_lctype 1, text such as
-- "typing…") that clients send as *transient* messages. Transient messages
-- reach on_transient, not moderation or on_receive. The plugin remembers who
-- is typing for a few seconds, can relay "<user> is typing…" as a transient
-- operation message of its own, and answers "/typing" with who is typing now. Its words are translated
-- (plugins/locales/typing/<locale>.toml); the relay is said in the conversation's language.

return {
  name = "typing",
  config = {
    type = 1,            -- the operation type number
    ttl = 6,             -- seconds a typing notification counts
    announce = false,    -- relay "{user} is typing…" transiently (for clients without indicators)
    announce_text = false,  -- false: translated ("{user} is typing…"); a string: that text in every language
  },

  on_load = function(ctx)
    ctx.types.register({ type = ctx.config.type, name = "operation", fields = { op = "string?" } })
  end,

  on_transient = function(msg, ctx)
    if msg.type_name ~= "operation" then return end
    local conv = ctx.state.conv(msg.cid)
    local already = conv.get("typing:" .. msg.from)
    conv.set("typing:" .. msg.from, ctx.now(), ctx.config.ttl)
    conv.incr("count:" .. msg.from)
    if ctx.config.announce and not already then
      local text = ctx.config.announce_text
      if type(text) == "string" then
        text = text:gsub("{user}", function() return msg.from end)
      else
        text = ctx.t("announce", { user = msg.from }, { conv = msg.cid })
      end
      ctx.send_transient(msg.cid, ctx.types.build("operation", { op = "typing" }, { text = text }))
    end
  end,

  on_receive = function(msg, ctx)
    local conv = ctx.state.conv(msg.cid)
    conv.delete("typing:" .. msg.from)
    if msg.text ~= "/typing" then return end
    local who = {}
    for _, key in ipairs(conv.keys("typing:")) do who[#who + 1] = key:sub(8) end
    table.sort(who)
    if #who == 0 then return ctx.reply(ctx.t("nobody")) end
    ctx.reply(ctx.t("now", { users = table.concat(who, ctx.t("separator")), count = #who }))
  end,
}
