-- Moderation: banned words and patterns (with normalisation against simple
-- evasions), link and mention limits, flood control, an escalation ladder
-- (warn -> mute -> kick) kept in state, the !mod command and an audit log.
--
-- `patterns` are Lua patterns (not regular expressions), matched against the
-- lowercased text. Keep them simple: Lua matching runs in C and is not
-- interrupted by the instruction budget, so the text is cut to `max_scan`
-- bytes first.
--
-- Files (image, audio, video and file messages) are checked against the
-- server's record of the file (msg.file.mime, size and sha256, see
-- docs/PLUGINS.md "Files"): which kinds and types may be posted, the largest
-- size, banned files by SHA-256, files that are not stored on the hub, and no
-- files from members who joined less than `new_member_minutes` ago. Join times
-- come from the join events this plugin sees, kept in its state, so they
-- survive a restart of the bot; a member whose join the bot never saw (it
-- joined before the bot was there, or while it was down) counts as
-- established.

local RULES = { "flood", "links", "mentions", "pattern", "word",
                "file_banned", "file_kind", "file_type", "file_size", "file_url", "file_new_member" }
local FILE_KINDS = { image = true, audio = true, video = true, file = true }

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
local words, patterns, moderators, exempt, file_kinds, file_mimes, banned_files

-- The file rule a message breaks, if any. Sizes, types and hashes of files stored on the hub are the
-- server's (msg.file.stored); a URL-only file has only what its sender claims, and no type or hash.
local function file_violation(msg, ctx)
  local c, f = ctx.config, msg.file
  if f.sha256 and banned_files[f.sha256] then return "file_banned" end
  local kind = FILE_KINDS[msg.type_name] and msg.type_name or "file"
  if not file_kinds[kind] then return "file_kind" end
  if #file_mimes > 0 then
    local mime, ok = f.stored and f.mime and f.mime:lower(), false
    for _, m in ipairs(file_mimes) do
      if mime and (mime == m or (m:sub(-2) == "/*" and mime:sub(1, #m - 1) == m:sub(1, -2))) then ok = true; break end
    end
    if not ok then return "file_type" end
  end
  if c.max_file_mb and f.size and f.size > c.max_file_mb * 1048576 then return "file_size" end
  if not c.url_files and not f.stored then return "file_url" end
  if c.new_member_minutes and c.new_member_minutes > 0 then
    local joined = ctx.state.conv(msg.cid).get("joined:" .. msg.from)
    if joined and ctx.now() - joined < c.new_member_minutes * 60 then return "file_new_member" end
  end
  return nil
end

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
  if type(msg.file) == "table" then
    local rule = file_violation(msg, ctx)
    if rule then return rule end
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
  local f = type(msg.file) == "table" and msg.file or nil
  audit(ctx, { cid = msg.cid, user = msg.from, rule = rule, action = step, strikes = strikes,
               text = (msg.text or ""):sub(1, 80), file = f and (f.name or f.url), sha256 = f and f.sha256 })
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
    for i, r in ipairs(RULES) do
      -- The file rules are listed only once they have blocked something.
      local n = conv.get("stats:" .. r) or 0
      if i <= 5 or n > 0 then parts[#parts + 1] = r .. " " .. n end
    end
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
    -- files (image, audio, video and file messages)
    file_kinds = { "image", "audio", "video", "file" }, -- the kinds of file messages allowed
    file_types = {},        -- MIME types of stored files allowed ("image/*", "audio/mpeg"); empty: any
    max_file_mb = 100,      -- largest file in MiB (false disables)
    banned_files = {},      -- SHA-256 (hex) of files that may not be posted
    url_files = true,       -- false: files not stored on the hub (a URL only) are refused
    new_member_minutes = 0, -- no files from members who joined less than this many minutes ago (0: off)
    reasons = {
      word = "please mind your language",
      pattern = "that message is not allowed here",
      links = "too many links",
      mentions = "too many mentions",
      flood = "slow down, you are sending messages too fast",
      muted = "you are muted",
      file_banned = "that file is not allowed here",
      file_kind = "that kind of file is not allowed here",
      file_type = "that type of file is not allowed here",
      file_size = "that file is too large",
      file_url = "only files uploaded here may be posted",
      file_new_member = "new members cannot post files yet",
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
    -- File settings are checked here: a mistake is a load error, not a rule silently not applied.
    file_kinds = {}
    for _, k in ipairs(c.file_kinds) do
      if not FILE_KINDS[k] then
        error("plugins.moderation.file_kinds: '" .. tostring(k) .. "' is not one of image, audio, video, file", 0)
      end
      file_kinds[k] = true
    end
    file_mimes = {}
    for _, m in ipairs(c.file_types) do
      if type(m) ~= "string" or not m:lower():match("^[%w%.%+%-]+/[%w%.%+%-%*]+$") or (m:find("*", 1, true) and m:sub(-2) ~= "/*") then
        error("plugins.moderation.file_types: '" .. tostring(m) .. "' is not a MIME type such as image/png or image/*", 0)
      end
      file_mimes[#file_mimes + 1] = m:lower()
    end
    banned_files = {}
    for _, h in ipairs(c.banned_files) do
      if type(h) ~= "string" or #h ~= 64 or h:find("[^%x]") then
        error("plugins.moderation.banned_files: '" .. tostring(h) .. "' is not a SHA-256 (64 hex digits)", 0)
      end
      banned_files[h:lower()] = true
    end
    if c.max_file_mb and c.max_file_mb <= 0 then
      error("plugins.moderation.max_file_mb: must be more than 0 (or false)", 0)
    end
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
    local minutes = ctx.config.new_member_minutes
    for _, uid in ipairs(ev.members) do
      -- When members joined (for new_member_minutes), kept no longer than the rule needs it.
      if minutes and minutes > 0 then
        ctx.state.conv(ev.cid).set("joined:" .. uid, ctx.now(), minutes * 60)
      end
      if ctx.state.conv(ev.cid).get("banned:" .. uid) then
        ctx.kick(ev.cid, uid, "banned")
        audit(ctx, { cid = ev.cid, user = uid, action = "kick", rule = "banned" })
      end
    end
  end,
}
