-- Polls as a custom message type (_lctype 2). A member posts a poll message
-- whose fields travel in attrs ({question, options}); members vote with
-- "/vote N"; the bot keeps one vote per member in state and replies with the
-- tally. "/poll" shows the results, "/poll close" (by the poll's author) ends it.

local function results(conv, poll)
  local counts, total = {}, 0
  for i = 1, #poll.options do counts[i] = 0 end
  for _, key in ipairs(conv.keys("vote:")) do
    local n = conv.get(key)
    if counts[n] then counts[n] = counts[n] + 1; total = total + 1 end
  end
  local parts = {}
  for i, option in ipairs(poll.options) do parts[#parts + 1] = option .. " " .. counts[i] end
  local text = string.format("%s %s (%d vote%s)", poll.question, table.concat(parts, ", "), total, total == 1 and "" or "s")
  return { text = text, attrs = { poll = poll.id, counts = counts } }
end

local function clear_votes(conv)
  for _, key in ipairs(conv.keys("vote:")) do conv.delete(key) end
end

return {
  name = "poll",
  config = { type = 2, max_options = 10 },

  on_load = function(ctx)
    ctx.types.register({ type = ctx.config.type, name = "poll",
                         fields = { question = "string", options = "table" } })
  end,

  -- Malformed polls never reach the conversation (when the bot is the interceptor).
  moderation = function(msg, ctx)
    if msg.type_name ~= "poll" then return nil end
    local ok, why = ctx.types.validate(msg)
    if not ok then return ctx.block("invalid poll: " .. why) end
    local n = #msg.attrs.options
    if n < 2 or n > ctx.config.max_options then
      return ctx.block("a poll needs 2 to " .. ctx.config.max_options .. " options")
    end
  end,

  on_receive = function(msg, ctx)
    local conv = ctx.state.conv(msg.cid)
    if msg.type_name == "poll" then
      clear_votes(conv)
      conv.set("poll", { id = msg.id, question = msg.attrs.question, options = msg.attrs.options, by = msg.from })
      local lines = {}
      for i, option in ipairs(msg.attrs.options) do lines[#lines + 1] = i .. ") " .. option end
      return ctx.reply(string.format("Poll by %s: %s %s - vote with /vote N",
        msg.from, msg.attrs.question, table.concat(lines, " ")))
    end
    local text = msg.text or ""
    local poll = conv.get("poll")
    local n = text:match("^/vote%s+(%d+)%s*$")
    if n then
      if not poll then return ctx.reply("there is no open poll") end
      n = tonumber(n)
      if not poll.options[n] then return ctx.reply("choose an option from 1 to " .. #poll.options) end
      conv.set("vote:" .. msg.from, n)
      return ctx.reply(results(conv, poll))
    elseif text == "/poll" then
      return ctx.reply(poll and results(conv, poll) or "there is no open poll")
    elseif text == "/poll close" then
      if not poll then return ctx.reply("there is no open poll") end
      if poll.by ~= msg.from then return ctx.reply("only " .. poll.by .. " can close this poll") end
      local final = results(conv, poll)
      final.text = "Final: " .. final.text
      clear_votes(conv)
      conv.delete("poll")
      return ctx.reply(final)
    end
  end,
}
