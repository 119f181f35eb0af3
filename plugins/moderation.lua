-- Moderation: banned words and patterns (with normalisation against simple
-- evasions), link and mention limits, flood control, an escalation ladder
-- (warn -> mute -> kick) kept in state, the !mod command and an audit log.
--
-- `patterns` are Lua patterns (not regular expressions), matched against the
-- lowercased text. Keep them simple: Lua matching runs in C and is not
-- interrupted by the instruction budget, so the text is cut to `max_scan`
-- bytes first.

local RULES = { "flood", "links", "mentions", "pattern", "word" }

local function set_of(list)
  local s = {}
  for _, v in ipairs(list or {}) do s[v] = true end
  return s
end

-- Fullwidth forms (U+FF01..U+FF5E) and the ideographic space become ASCII.
local function ascii_width(text)
  if not utf8.len(text) then return text end
  local out = {}
  for _, cp in utf8.codes(text) do
    if cp >= 0xFF01 and cp <= 0xFF5E then cp = cp - 0xFEE0 elseif cp == 0x3000 then cp = 32 end
    out[#out + 1] = utf8.char(cp)
  end
  return table.concat(out)
end

-- Lowercase, ASCII width, punctuation removed inside words, runs of
-- single-letter words joined ("s c a m" -> "scam"), repeated letters
-- collapsed ("scaaam" -> "scam"). Returns " word word " (spaces around) and
-- the joined runs, in which words are searched anywhere ("a s c a m").
local function normalize(text)
  local s = ascii_width(text):lower()
  local words, runs, run = {}, {}, {}
  local function flush()
    if #run > 1 then runs[#runs + 1] = table.concat(run) end
    if #run > 0 then words[#words + 1] = table.concat(run); run = {} end
  end
  for token in s:gmatch("%S+") do
    local w, n = token:gsub("%p", ""), 1
    while n > 0 do w, n = w:gsub("(%a)%1", "%1") end
    if #w == 1 then
      run[#run + 1] = w
    elseif #w > 1 then
      flush()
      words[#words + 1] = w
    end
  end
  flush()
  return " " .. table.concat(words, " ") .. " ", runs
end

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

-- Links in the lowercased text, each once: those with a scheme (http://, https://), and bare www.
-- names outside them ("https://www.x" is one link, not two).
local function links(lower)
  local bare = lower:gsub("https?://%S*", " ")
  return count(lower, "https?://") + count(bare, "%f[%w]www%.")
end

-- Compiled once per loaded version (config does not change without a reload).
local words, patterns, moderators, exempt

local function is_moderator(uid) return moderators[uid] == true end

local function audit(ctx, entry)
  entry.t = ctx.now()
  local log = ctx.state.get("audit") or {}
  log[#log + 1] = entry
  local keep = ctx.config.audit_size
  while #log > keep do table.remove(log, 1) end
  ctx.state.set("audit", log)
end

-- Which rule the message breaks, if any.
local function violation(msg, ctx)
  local c = ctx.config
  local text = msg.text or ""
  if c.flood and c.flood.messages then
    -- A fixed window: the first message sets the counter's expiry, later ones keep it.
    local n = ctx.state.conv(msg.cid).incr("flood:" .. msg.from, 1, c.flood.seconds)
    if n > c.flood.messages then return "flood" end
  end
  if text == "" then return nil end
  local scan = text:sub(1, c.max_scan)
  local lower = scan:lower()
  if c.max_links and links(lower) > c.max_links then return "links" end
  if c.max_mentions and count(" " .. scan, "[%s]@[%w_%-]+") > c.max_mentions then return "mentions" end
  local norm, runs = normalize(scan)
  for _, w in ipairs(words) do
    if w.loose then
      if norm:find(w.text, 1, true) then return "word" end
    elseif norm:find(" " .. w.text .. " ", 1, true) then
      return "word"
    end
    for _, r in ipairs(runs) do
      if r:find(w.text, 1, true) then return "word" end
    end
  end
  for _, p in ipairs(patterns) do
    if lower:find(p) or norm:find(p) then return "pattern" end
  end
  return nil
end

-- The next rung of the ladder for this user in this conversation.
local function escalate(msg, ctx, rule)
  local c = ctx.config
  local conv = ctx.state.conv(msg.cid)
  local ttl = c.strike_ttl and c.strike_ttl > 0 and c.strike_ttl or nil
  -- Sliding: each strike keeps the earlier ones for another strike_ttl seconds.
  local strikes = conv.incr("strikes:" .. msg.from, 1, ttl, "sliding")
  local step = c.ladder[math.min(strikes, #c.ladder)] or "warn"
  local reason = c.reasons[rule] or rule
  local actions = {}
  if step == "mute" then
    local seconds = c.mute_minutes * 60
    actions.mute = seconds
    actions.warn = reason .. "; muted for " .. c.mute_minutes .. " min"
    conv.set("muted:" .. msg.from, ctx.now() + seconds, seconds)
  elseif step == "kick" then
    actions.kick = reason
    conv.set("banned:" .. msg.from, true)
  else
    actions.warn = reason
  end
  conv.incr("stats:blocked")
  conv.incr("stats:" .. rule)
  conv.incr("stats:" .. step)
  audit(ctx, { cid = msg.cid, user = msg.from, rule = rule, action = step, strikes = strikes,
               text = (msg.text or ""):sub(1, 80) })
  return actions
end

-- The mod command (`!mod …` declared with ctx.commands, or a `mod` cmd message); `reply` answers the
-- moderator.
local function mod_command(ctx, cid, from, args, reply)
  local mod = ctx.commands.prefix .. "mod"
  local sub, user = args.command, args.user
  local conv = ctx.state.conv(cid)
  if sub == "unban" then
    if not user or user == "" then return reply("usage: " .. mod .. " unban <user>") end
    local was_banned = conv.get("banned:" .. user)
    conv.delete("strikes:" .. user)
    conv.delete("muted:" .. user)
    conv.delete("banned:" .. user)
    -- Mutes are the server's: lifting one there lets the user speak at once (SDK clients see it too).
    ctx.conv(cid).unmute(user, "unbanned by " .. from)
    if was_banned then ctx.add(cid, user) end
    audit(ctx, { cid = cid, user = user, action = "unban", by = from })
    return reply(user .. " is unbanned; strikes cleared")
  elseif sub == "strikes" then
    if not user or user == "" then return reply("usage: " .. mod .. " strikes <user>") end
    return reply(user .. " has " .. (conv.get("strikes:" .. user) or 0) .. " strike(s)")
  elseif sub == "stats" then
    local parts = {}
    for _, r in ipairs(RULES) do parts[#parts + 1] = r .. " " .. (conv.get("stats:" .. r) or 0) end
    return reply(string.format("moderation in %s: %d blocked (%s); %d warned, %d muted, %d kicked",
      cid, conv.get("stats:blocked") or 0, table.concat(parts, ", "),
      conv.get("stats:warn") or 0, conv.get("stats:mute") or 0, conv.get("stats:kick") or 0))
  elseif sub == "audit" then
    local log = ctx.state.get("audit") or {}
    local n = math.min(tonumber(user) or 5, #log)
    if n == 0 then return reply("audit log is empty") end
    local lines = {}
    for i = #log - n + 1, #log do
      local e = log[i]
      lines[#lines + 1] = string.format("%s %s %s%s", e.cid, e.user, e.action, e.rule and (" (" .. e.rule .. ")") or "")
    end
    return reply(table.concat(lines, "\n"))
  end
  return reply(string.format("usage: %s unban <user> | %s strikes <user> | %s stats | %s audit [n]", mod, mod, mod, mod))
end

return {
  name = "moderation",
  priority = 100,
  config = {
    words = {},             -- banned words or phrases, compared after normalisation
    substring = false,      -- true: a word also matches inside longer words
    patterns = {},          -- Lua patterns on the lowercased text
    max_links = 3,          -- false disables
    max_mentions = 5,       -- false disables
    flood = { messages = 5, seconds = 10 }, -- false disables
    ladder = { "warn", "mute", "kick" },    -- what the 1st, 2nd, 3rd... strike does
    mute_minutes = 10,
    strike_ttl = 86400,     -- strikes are forgotten this many seconds after the last one (0: never)
    moderators = {},        -- hold the moderator role (!mod) and are not moderated
    exempt = { "modbot" },  -- never moderated (the bot's own client id belongs here)
    code = 4301,            -- application error code of blocked messages
    silent = false,         -- true: senders are not told their message was blocked
    max_scan = 2000,        -- bytes of text checked by words and patterns
    audit_size = 100,
    reasons = {
      word = "please mind your language",
      pattern = "that message is not allowed here",
      links = "too many links",
      mentions = "too many mentions",
      flood = "slow down, you are sending messages too fast",
      muted = "you are muted",
    },
  },

  on_load = function(ctx)
    local c = ctx.config
    words = {}
    for _, w in ipairs(c.words) do
      local n = (normalize(w)):match("^%s*(.-)%s*$")
      if n ~= "" then
        -- CJK and other non-ASCII words have no spaces around them: match them anywhere.
        words[#words + 1] = { text = n, loose = c.substring or n:find("[\128-\255]") ~= nil }
      end
    end
    patterns = {}
    for _, p in ipairs(c.patterns) do
      if pcall(string.find, "", p) then patterns[#patterns + 1] = p
      else ctx.log("warning", "moderation: ignoring invalid pattern " .. p) end
    end
    moderators, exempt = set_of(c.moderators), set_of(c.exempt)
    if ctx.bot then exempt[ctx.bot] = true end
    -- Configured moderators hold the role the command needs; more can be granted with ctx.roles or [roles].
    for uid in pairs(moderators) do ctx.roles.grant(uid, "moderator") end
    ctx.commands.add{
      name = "mod", args = "[action] [target]", roles = { "moderator" },
      description = "unban <user>, strikes <user>, stats, audit [n]",
      run = function(args, msg, ctx)
        mod_command(ctx, msg.cid, msg.from, { command = args.action, user = args.target }, ctx.reply)
      end,
    }
  end,

  moderation = function(msg, ctx)
    if exempt[msg.from] or is_moderator(msg.from) then return nil end
    local conv = ctx.state.conv(msg.cid)
    if conv.get("muted:" .. msg.from) then
      return ctx.block(ctx.config.reasons.muted or "you are muted", { code = ctx.config.code, silent = true })
    end
    local rule = violation(msg, ctx)
    if not rule then return nil end
    local actions = escalate(msg, ctx, rule)
    return ctx.block(ctx.config.reasons[rule] or rule, { code = ctx.config.code, silent = ctx.config.silent, actions = actions })
  end,

  on_cmd = function(cmd, ctx)
    if cmd.action ~= "mod" then return end
    local send = function(text) ctx.send(cmd.cid, text) end
    if not (is_moderator(cmd.from) or ctx.roles.has(cmd.from, "moderator")) then
      return send(ctx.commands.prefix .. "mod is only for moderator")
    end
    mod_command(ctx, cmd.cid, cmd.from, cmd.ext, send)
  end,

  on_member_joined = function(ev, ctx)
    for _, uid in ipairs(ev.members) do
      if ctx.state.conv(ev.cid).get("banned:" .. uid) then
        ctx.kick(ev.cid, uid, "banned")
        audit(ctx, { cid = ev.cid, user = uid, action = "kick", rule = "banned" })
      end
    end
  end,
}
