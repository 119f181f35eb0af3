-- Typing indicators: the "operation" custom type (_lctype 1, text such as
-- "typing…") that clients send as *transient* messages. Transient messages
-- reach on_transient, not moderation or on_receive. The plugin remembers who
-- is typing for a few seconds, can relay "<user> is typing…" as a transient
-- operation message of its own, and answers "/typing" with who is typing now.

return {
  name = "typing",
  config = {
    type = 1,            -- the operation type number
    ttl = 6,             -- seconds a typing notification counts
    announce = false,    -- relay "{user} is typing…" transiently (for clients without indicators)
    announce_text = "{user} is typing…",
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
      local text = ctx.config.announce_text:gsub("{user}", msg.from)
      ctx.send_transient(msg.cid, ctx.types.build("operation", { op = "typing" }, { text = text }))
    end
  end,

  on_receive = function(msg, ctx)
    local conv = ctx.state.conv(msg.cid)
    conv.delete("typing:" .. msg.from)
    if msg.text ~= "/typing" then return end
    local who = {}
    for _, key in ipairs(conv.keys("typing:")) do who[#who + 1] = key:sub(8) end
    ctx.reply(#who > 0 and ("typing now: " .. table.concat(who, ", ")) or "nobody is typing")
  end,
}
