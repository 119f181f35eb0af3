-- Polls as cards. A member posts a poll message (custom type "poll", _lctype 2, fields {question,
-- options} in attrs); the bot answers with a card (ctx.card, _lctype 100) whose buttons are the options.
-- A click is a vote: one per member (a click on another option moves it), and the card's counts are
-- updated in place (a message edit). "/vote N" does the same for clients without cards, "/poll" shows
-- the results, "/poll close" (by the poll's author) ends it: the card shows the final count and its
-- buttons are disabled.

local function tally(conv, poll)
  local counts, total = {}, 0
  for i = 1, #poll.options do counts[i] = 0 end
  for _, key in ipairs(conv.keys("vote:")) do
    local n = conv.get(key)
    if counts[n] then counts[n] = counts[n] + 1; total = total + 1 end
  end
  return counts, total
end

local function summary(conv, poll)
  local counts, total = tally(conv, poll)
  local parts = {}
  for i, option in ipairs(poll.options) do parts[#parts + 1] = option .. " " .. counts[i] end
  return string.format("%s %s (%d vote%s)", poll.question, table.concat(parts, ", "), total, total == 1 and "" or "s")
end

-- The card of a poll as it stands: a button per option with its count.
local function card(conv, poll, closed)
  local counts, total = tally(conv, poll)
  local buttons = {}
  for i, option in ipairs(poll.options) do
    buttons[i] = { label = option .. " · " .. counts[i], value = tostring(i), style = closed and "secondary" or "primary" }
  end
  return {
    title = poll.question,
    text = string.format("%s%d vote%s", closed and "Final: " or "", total, total == 1 and "" or "s"),
    fields = { { name = "by", value = poll.by, inline = true } },
    buttons = buttons,
    disabled = closed or false,
  }
end

local function clear_votes(conv)
  for _, key in ipairs(conv.keys("vote:")) do conv.delete(key) end
end

local function vote(ctx, conv, poll, member, n)
  conv.set("vote:" .. member, n)
  ctx.card_update(poll.card, card(conv, poll))
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
      local old = conv.get("poll")
      if old then ctx.card_update(old.card, card(conv, old, true)) end
      clear_votes(conv)
      local poll = { question = msg.attrs.question, options = msg.attrs.options, by = msg.from }
      poll.card = ctx.card(card(conv, poll)).id
      conv.set("poll", poll)
      return
    end
    local text = msg.text or ""
    local poll = conv.get("poll")
    local n = text:match("^/vote%s+(%d+)%s*$")
    if n then
      if not poll then return ctx.reply("there is no open poll") end
      n = tonumber(n)
      if not poll.options[n] then return ctx.reply("choose an option from 1 to " .. #poll.options) end
      return vote(ctx, conv, poll, msg.from, n)
    elseif text == "/poll" then
      return ctx.reply(poll and summary(conv, poll) or "there is no open poll")
    elseif text == "/poll close" then
      if not poll then return ctx.reply("there is no open poll") end
      if poll.by ~= msg.from then return ctx.reply("only " .. poll.by .. " can close this poll") end
      ctx.card_update(poll.card, card(conv, poll, true))
      ctx.reply("Final: " .. summary(conv, poll))
      clear_votes(conv)
      conv.delete("poll")
    end
  end,

  -- A click on one of the card's buttons: the member's vote.
  on_action = function(action, ctx)
    local conv = ctx.state.conv(action.cid)
    local poll = conv.get("poll")
    if not poll or poll.card ~= action.card.id then
      return ctx.card_update(action.card.id, { text = "This poll is over.", disabled = true })
    end
    local n = tonumber(action.value)
    if conv.get("vote:" .. action.member) == n then return end
    vote(ctx, conv, poll, action.member, n)
  end,
}
