-- Moderation: a rules engine. Each rule has a trigger (keywords, regular
-- expressions and presets through the host's bounded matcher, links by
-- domain, mentions, message rate, duplicates, capitals, emoji and zalgo
-- floods), actions (block with a message, delete, warn, a timed mute on the
-- server, kick, ban, alert the moderators, a strike on the escalation ladder),
-- where it applies (conversations, new members only) and who it spares
-- (roles, conversations); a rule in dry run only says in the mod-log what it
-- would have done. Strikes decay one by one; `!appeal` reaches the
-- moderators; `!mod` pardons, shows a member's history, the rules with their
-- hits, and turns dry run on and off. Every action goes to the mod-log
-- (lib/modlog.lua) with who, why, which rule and how to undo it.
--
-- The older settings keep working as built-in rules checked before `rules`:
-- `words` and `patterns` (Lua patterns, not regular expressions: the text is
-- cut to `max_scan` bytes first), `max_links`, `max_mentions`, `flood`, and
-- the file rules. Files (image, audio, video and file messages) are checked
-- against the server's record of the file (msg.file.mime, size and sha256,
-- see docs/PLUGINS.md "Files"): which kinds and types may be posted, the
-- largest size, banned files by SHA-256, files that are not stored on the
-- hub, and no files from members who joined less than `new_member_minutes`
-- ago.
--
-- Guide for moderators: docs/MODERATION.md. Settings: plugins/README.md.

local ok_modlog, modlog = pcall(require, "modlog")
if not ok_modlog then modlog = nil end

local LEGACY = { "flood", "links", "mentions", "pattern", "word",
                 "file_banned", "file_kind", "file_type", "file_size", "file_url", "file_new_member" }
local FILE_KINDS = { image = true, audio = true, video = true, file = true }
local ACTIONS = { block = true, delete = true, warn = true, mute = true, kick = true, ban = true, alert = true,
                  strike = true }
local RULE_FIELDS = { name = true, trigger = true, action = true, actions = true, message = true, mute = true,
                      conversations = true, exempt_roles = true, exempt_conversations = true, dry_run = true,
                      new_members = true }
local TRIGGERS = { keywords = true, regex = true, presets = true, allow = true, links = true, mentions = true,
                   rate = true, duplicates = true, caps = true, emoji = true, zalgo = true }
local MAX_MUTE = 28 * 86400 -- the server's mutes: up to 4 weeks
local UNITS = { s = 1, m = 60, h = 3600, d = 86400, w = 604800 }

local function set_of(list)
  local s = {}
  for _, v in ipairs(list or {}) do s[v] = true end
  return s
end

local function keys_of(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return table.concat(out, ", ")
end

-- "90", 90, "10m", "1d", "4w" -> seconds (nil, reason when it is not a duration).
local function duration(v)
  if type(v) == "number" then
    if v > 0 then return math.floor(v) end
    return nil, "must be more than 0"
  end
  if type(v) ~= "string" then return nil, "must be a number of seconds or a text such as \"10m\", \"1d\"" end
  local n, unit = v:match("^%s*(%d+%.?%d*)%s*([smhdw]?)%s*$")
  if not n then return nil, "'" .. v .. "' is not a duration such as 90, \"10m\", \"2h\", \"1d\", \"4w\"" end
  local seconds = math.floor(tonumber(n) * UNITS[unit ~= "" and unit or "s"])
  if seconds <= 0 then return nil, "must be more than 0" end
  return seconds
end

-- 600 -> "10 min", 86400 -> "1 d"
local function human(seconds)
  if seconds % 604800 == 0 then return (seconds // 604800) .. " w" end
  if seconds % 86400 == 0 then return (seconds // 86400) .. " d" end
  if seconds % 3600 == 0 then return (seconds // 3600) .. " h" end
  if seconds % 60 == 0 then return (seconds // 60) .. " min" end
  return seconds .. " s"
end

-- Fullwidth forms (U+FF01..U+FF5E) and the ideographic space become ASCII.
local function ascii_width(text)
  -- Fullwidth forms are EF BC xx / EF BD xx in UTF-8, the ideographic space E3 80 80.
  if not text:find("[\227\239]") or not utf8.len(text) then return text end
  local out = {}
  for _, cp in utf8.codes(text) do
    if cp >= 0xFF01 and cp <= 0xFF5E then cp = cp - 0xFEE0 elseif cp == 0x3000 then cp = 32 end
    out[#out + 1] = utf8.char(cp)
  end
  return table.concat(out)
end

-- The `words` setting: lowercase, ASCII width, punctuation removed inside
-- words, runs of single-letter words joined ("s c a m" -> "scam"), repeated
-- letters collapsed ("scaaam" -> "scam"). Returns " word word " (spaces
-- around) and the joined runs, in which words are searched anywhere.
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
local function count_links(lower)
  local bare = lower:gsub("https?://%S*", " ")
  return count(lower, "https?://") + count(bare, "%f[%w]www%.")
end

-- Compiled once per loaded version (config does not change without a reload).
local words, patterns, moderators, exempt, file_kinds, file_mimes, banned_files
local rules, custom, by_name, ladder, legacy_rule
-- Whether the host keeps member records (ctx.conv(cid).member), and whether a rule counts messages.
local member_api, appeal_prefix, join_keep
local membership -- defined below, used by the file rules
-- Counters that need no history beyond their window live in memory (a restart forgets at most one window).
local windows, dups, muted_cache, joins, conv_api

-- The file rule a message breaks, if any. Sizes, types and hashes of files stored on the hub are the
-- server's (msg.file.stored); a URL-only file has only what its sender claims, and no type or hash.
local function file_violation(msg, ctx, m)
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
    local joined = membership(ctx, msg.cid, msg.from, m)
    if joined and ctx.now() - joined < c.new_member_minutes * 60 then return "file_new_member" end
  end
  return nil
end

local function audit(ctx, entry)
  entry.t = ctx.now()
  local log = ctx.state.get("audit") or {}
  log[#log + 1] = entry
  local keep = ctx.config.audit_size
  while #log > keep do table.remove(log, 1) end
  ctx.state.set("audit", log)
end

local function post(ctx, entry)
  if modlog then return modlog.post(ctx, entry) end
end

-- A fixed window counter in memory: the first event opens a window of `seconds`, later ones in it count.
local function bump(tbl, key, seconds, now)
  local w = tbl[key]
  if not w or now >= w.ends then
    w = { ends = now + seconds, n = 0 }
    tbl[key] = w
    tbl.size = (tbl.size or 0) + 1
    if tbl.size > 20000 then
      -- Forget closed windows once the table grows (a busy hub with many members).
      local live = 1
      for k, v in pairs(tbl) do
        if k ~= "size" and k ~= key then
          if now >= v.ends then tbl[k] = nil else live = live + 1 end
        end
      end
      tbl.size = live
    end
  end
  w.n = w.n + 1
  return w
end

-- Which built-in (legacy) rule the message breaks, if any.
local function legacy_violation(msg, ctx, now, m)
  local c = ctx.config
  local text = msg.text or ""
  if c.flood and c.flood.messages then
    -- A fixed window: the member's first message opens it, the counter resets when it closes.
    local w = bump(windows, "flood\0" .. msg.cid .. "\0" .. msg.from, c.flood.seconds, now)
    if w.n > c.flood.messages then return "flood" end
  end
  if type(msg.file) == "table" then
    local rule = file_violation(msg, ctx, m)
    if rule then return rule end
  end
  if text == "" then return nil end
  local scan = text:sub(1, c.max_scan)
  local lower = scan:lower()
  if c.max_links and (lower:find("http", 1, true) or lower:find("www.", 1, true))
    and count_links(lower) > c.max_links then return "links" end
  if c.max_mentions and scan:find("@", 1, true) and count(" " .. scan, "[%s]@[%w_%-]+") > c.max_mentions then
    return "mentions"
  end
  if #words > 0 then
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
  elseif #patterns > 0 then
    local norm = normalize(scan)
    for _, p in ipairs(patterns) do
      if lower:find(p) or norm:find(p) then return "pattern" end
    end
  end
  return nil
end

local function host_of(h, domains)
  for _, d in ipairs(domains) do
    if h == d or (#h > #d and h:sub(-#d - 1) == "." .. d) then return d end
  end
  return nil
end

-- Whether a rule's trigger fires on the message; the second value says why.
-- `m` caches what several rules need (the text's stats and links).
local function fires(rule, msg, ctx, m, now)
  local t, text = rule.trigger, m.text
  if t.rate then
    local w = bump(windows, rule.name .. "\0" .. msg.cid .. "\0" .. msg.from, t.rate.seconds, now)
    if w.n > t.rate.messages then
      return true, w.n .. " messages in " .. t.rate.seconds .. " s (limit " .. t.rate.messages .. ")"
    end
  end
  if text == "" then return false end
  if t.matcher then
    local hit = t.matcher:find(text)
    if hit then
      local what = hit.preset and ("preset " .. hit.preset .. ": ") or (hit.kind .. " ")
      return true, what .. "'" .. tostring(hit.match or hit.term) .. "'"
    end
  end
  if t.links then
    if not m.urls then m.urls = ctx.text.urls(text) end
    local urls, l = m.urls, t.links
    if l.max and #urls > l.max then
      return true, #urls .. (l.max == 0 and " link(s)" or " links (limit " .. l.max .. ")")
    end
    for _, u in ipairs(urls) do
      local h = (u.host or ""):lower()
      if l.deny and host_of(h, l.deny) then return true, "link to " .. h end
      if l.allow and not host_of(h, l.allow) then return true, "link to " .. h .. " (not on the allow list)" end
    end
  end
  -- The text's stats are asked for only when a cheap look says a limit could be passed: a mention needs
  -- an @, capitals two capital letters in a row, each emoji at least 2 bytes, each combining mark 2.
  local n = #text
  if (t.mentions and text:find("@", 1, true)) or (t.caps and n >= t.caps.min_length and text:find("%u%u"))
    or (t.emoji and n > t.emoji * 2) or (t.zalgo and n > t.zalgo * 2) then
    if not m.stats then m.stats = ctx.text.stats(text) end
    local s = m.stats
    if t.mentions and s.mentions > t.mentions then
      return true, s.mentions .. " mentions (limit " .. t.mentions .. ")"
    end
    if t.caps and s.length >= t.caps.min_length and s.caps >= t.caps.ratio then
      return true, math.floor(s.caps * 100 + 0.5) .. " % capitals"
    end
    if t.emoji and s.emoji > t.emoji then return true, s.emoji .. " emoji (limit " .. t.emoji .. ")" end
    if t.zalgo and s.zalgo > t.zalgo and s.zalgo > s.length then
      return true, s.zalgo .. " combining marks on " .. s.length .. " characters"
    end
  end
  local d = t.duplicates
  if d then
    if not m.chars then m.chars = utf8.len(text) or n end
    if m.chars >= d.min_length then
      if not m.dup then m.dup = text:lower():gsub("%s+", " ") end
      local key = d.across and (rule.name .. "\0" .. msg.cid .. "\0" .. m.dup)
        or (rule.name .. "\0" .. msg.cid .. "\0" .. msg.from .. "\0" .. m.dup)
      local w = bump(dups, key, d.seconds, now)
      if w.n >= d.count then
        return true, "the same text " .. w.n .. " times in " .. d.seconds .. " s" .. (d.across and " (several members)" or "")
      end
    end
  end
  return false
end

-- Whether `uid` holds one of `roles`: owner and manager are the conversation's own (manager includes the
-- owner), any other role is the bot's ([roles], ctx.roles.grant).
local function holds(ctx, cid, uid, roles)
  local member
  for _, role in ipairs(roles) do
    if role == "owner" or role == "manager" then
      if member == nil then
        local conv = ctx.conv(cid)
        member = conv.member and conv.member(uid) or false
      end
      if member and (member.role == "owner" or (role == "manager" and member.role == "manager")) then return true end
    elseif ctx.roles.has(uid, role) then
      return true
    end
  end
  return false
end

-- Whether `uid` is a new member of `cid` for a rule's new_members = {minutes, messages}: joined less than
-- `minutes` ago, or sent fewer than `messages` messages there. Founders of the conversation, and members
-- whose join time is unknown (they were there before the bot), are established.
-- When `uid` joined `cid` and how many messages they sent there, as far as the host (its member records)
-- or the plugin (the joins it saw) knows; nil when unknown. Founders of the conversation never count as
-- joiners. Looked up once per message (`m` caches it).
function membership(ctx, cid, uid, m)
  if m.joined ~= nil then return m.joined or nil, m.sent end
  local joined, sent
  if member_api then
    local api = conv_api[cid]
    if not api then api = ctx.conv(cid); conv_api[cid] = api end
    local member = api.member(uid)
    if member and not member.founder then joined, sent = member.joined_at, member.messages end
  end
  if not joined then
    -- The joins the plugin saw, read from its state once per conversation and kept in memory.
    local j = joins[cid]
    if not j then
      j = {}
      local conv = ctx.state.conv(cid)
      for _, k in ipairs(conv.keys("joined:")) do j[k:sub(8)] = conv.get(k) end
      joins[cid] = j
    end
    joined = j[uid]
  end
  m.joined, m.sent = joined or false, sent
  return joined, sent
end

-- Whether `uid` is a new member of `cid` for a rule's new_members = {minutes, messages}: joined less than
-- `minutes` ago, or sent fewer than `messages` messages there. Members whose join time is unknown (they
-- were there before the bot) are established.
local function is_new(ctx, cid, uid, nm, now, m)
  local joined, sent = membership(ctx, cid, uid, m)
  if not joined then return false end
  if nm.minutes and now - joined < nm.minutes * 60 then return true end
  if nm.messages and sent and sent < nm.messages then return true end
  return false
end

local function applies(rule, msg)
  if rule.conversations and not rule.conversations[msg.cid] then return false end
  if rule.exempt_conversations and rule.exempt_conversations[msg.cid] then return false end
  return true
end

local function dry(ctx, rule)
  local v = ctx.state.get("dryrun:" .. rule.name)
  if v == nil then return rule.dry_run end
  return v
end

-- Strikes decay one by one: each is forgotten strike_ttl seconds after it was given.
local function live_strikes(ctx, cid, uid, now)
  local ttl = ctx.config.strike_ttl
  local list = ctx.state.conv(cid).get("strikes:" .. uid) or {}
  if type(list) ~= "table" then list = {} end
  if not ttl or ttl <= 0 then return list end
  local live = {}
  for _, t in ipairs(list) do
    if now - t < ttl then live[#live + 1] = t end
  end
  return live
end

local function set_muted(ctx, cid, uid, seconds)
  local conv = ctx.state.conv(cid)
  if seconds then
    conv.set("muted:" .. uid, ctx.now() + seconds, seconds)
    if muted_cache[cid] then muted_cache[cid][uid] = ctx.now() + seconds end
  else
    conv.delete("muted:" .. uid)
    if muted_cache[cid] then muted_cache[cid][uid] = nil end
  end
end

local function muted_until(ctx, cid, uid, now)
  local mc = muted_cache[cid]
  if not mc then
    -- First message seen in this conversation since loading: read its mutes once.
    mc = {}
    local conv = ctx.state.conv(cid)
    for _, k in ipairs(conv.keys("muted:")) do
      local v = conv.get(k)
      if v then mc[k:sub(7)] = type(v) == "number" and v > now and v or math.huge end
    end
    muted_cache[cid] = mc
  end
  local t = mc[uid]
  if t and t <= now then mc[uid] = nil; return nil end
  return t
end

-- What a rule hit does. Returns the verdict (nil: the message goes through).
-- What a member is told, in their language: a rule's message (or a reason) that is the shipped English
-- wording (plugins/locales/moderation/en.toml, [messages]) is translated; your own wording is kept as it is.
-- Only when a rule fires, so it costs nothing on ordinary messages.
-- ctx.t, or `fallback` where the plugin runs without its locale files (ctx.t answers the key itself).
local function tr(ctx, key, vars, fallback)
  local text = ctx.t(key, vars)
  if text == key then return (fallback:gsub("{(%w+)}", function(k) return tostring(vars and vars[k] or "") end)) end
  return text
end

local function told(ctx, name, text)
  if not text then return text end
  local key = "messages." .. name
  if ctx.t(key, nil, { locale = "en" }) == text then return ctx.t(key) end
  return text
end

local function enforce(rule, msg, ctx, why, now)
  local c, cid, uid = ctx.config, msg.cid, msg.from
  local reason = told(ctx, rule.name, rule.message)
  local conv = ctx.state.conv(cid)
  ctx.state.incr("hits:" .. rule.name)
  local did, block, silent, recall = {}, false, c.silent, false
  local undo = ctx.commands.prefix .. "mod pardon " .. uid .. " " .. cid
  if dry(ctx, rule) then
    post(ctx, { action = table.concat(rule.action_names, ", "), target = uid, cid = cid, rule = rule.name,
                reason = why, by = ctx.bot or "moderation", dry_run = true,
                text = (msg.text or ""):sub(1, 200) })
    return nil
  end
  local a = rule.actions
  if a.block then block = true end
  if a.delete then block, silent = true, true; recall = c.recall_blocked end
  local warn, mute, kick, ban = a.warn and reason or nil, a.mute and rule.mute or nil, a.kick, a.ban
  local strikes
  if a.strike then
    local list = live_strikes(ctx, cid, uid, now)
    list[#list + 1] = now
    strikes = #list
    local ttl = c.strike_ttl and c.strike_ttl > 0 and c.strike_ttl or nil
    conv.set("strikes:" .. uid, list, ttl)
    local step = ladder[math.min(strikes, #ladder)]
    if step.action == "warn" then
      warn = reason
    elseif step.action == "mute" then
      mute = math.max(mute or 0, step.seconds)
      warn = tr(ctx, "muted_for", { reason = reason, time = human(mute) }, "{reason}; muted for {time}")
    elseif step.action == "kick" then
      kick = true
      conv.set("banned:" .. uid, true)
    elseif step.action == "ban" then
      ban = true
    end
    if rule.legacy then conv.incr("stats:" .. step.action) end
  elseif mute then
    warn = tr(ctx, "muted_for", { reason = warn or reason, time = human(mute) }, "{reason}; muted for {time}")
  end
  if rule.legacy then
    conv.incr("stats:blocked")
    conv.incr("stats:" .. rule.name)
  end
  if mute then
    ctx.conv(cid).mute(uid, mute, reason)
    set_muted(ctx, cid, uid, mute)
    did[#did + 1] = "mute " .. human(mute)
  end
  if warn and not kick and not ban then
    ctx.warn(cid, uid, warn)
    if not mute then did[#did + 1] = "warn" end
  end
  if kick then
    ctx.kick(cid, uid, reason)
    did[#did + 1] = "kick"
  end
  if ban then
    ctx.conv(cid).block(uid)
    did[#did + 1] = "ban"
  end
  if recall and msg.id and msg.id ~= "" then ctx.recall(cid, msg.id) end
  if block then table.insert(did, 1, a.delete and "delete" or "block") end
  if strikes then did[#did + 1] = "strike " .. strikes end
  if a.alert and #did == 0 then did[1] = "alert" end
  local f = type(msg.file) == "table" and msg.file or nil
  audit(ctx, { cid = cid, user = uid, rule = rule.name, action = strikes and ladder[math.min(strikes, #ladder)].action
               or (did[1] or "alert"), strikes = strikes, text = (msg.text or ""):sub(1, 80),
               file = f and (f.name or f.url), sha256 = f and f.sha256 })
  if a.alert and msg.text then why = why .. ": \"" .. msg.text:sub(1, 200) .. "\"" end
  post(ctx, { action = table.concat(did, " + "), target = uid, cid = cid, rule = rule.name, reason = why,
              by = ctx.bot or "moderation", undo = (strikes or mute or kick or ban) and undo or nil,
              alert = a.alert or nil })
  if block then
    return ctx.block(reason, { code = c.code, silent = silent })
  end
  return nil
end

local function parse_rule(i, r, ctx)
  local where = "plugins.moderation.rules[" .. i .. "]"
  if type(r) ~= "table" then error(where .. ": must be a table with name, trigger and actions", 0) end
  if type(r.name) ~= "string" or r.name == "" or not r.name:match("^[%w_%-%.]+$") then
    error(where .. ".name: must be a name of letters, digits, '_', '-' or '.'", 0)
  end
  where = where .. " (" .. r.name .. ")"
  for k in pairs(r) do
    if not RULE_FIELDS[k] then error(where .. ": unknown field '" .. tostring(k) .. "' (known: " .. keys_of(RULE_FIELDS) .. ")", 0) end
  end
  local t = r.trigger
  if type(t) ~= "table" or next(t) == nil then error(where .. ".trigger: must be a table such as { keywords = [...] }", 0) end
  for k in pairs(t) do
    if not TRIGGERS[k] then error(where .. ".trigger: unknown trigger '" .. tostring(k) .. "' (known: " .. keys_of(TRIGGERS) .. ")", 0) end
  end
  local rule = { name = r.name, trigger = {}, message = r.message or ("that message is not allowed here (" .. r.name .. ")"),
                 dry_run = r.dry_run == true }
  local tr = rule.trigger
  local function number(v, key, min)
    if type(v) ~= "number" or v < (min or 0) then
      error(where .. ".trigger." .. key .. ": must be a number of at least " .. (min or 0), 0)
    end
    return v
  end
  if t.keywords or t.regex or t.presets then
    if not ctx.matcher then error(where .. ".trigger: keywords, regex and presets need the host's ctx.matcher", 0) end
    local ok, m = pcall(ctx.matcher, { keywords = t.keywords, regex = t.regex, allow = t.allow, presets = t.presets })
    if not ok then error(where .. ".trigger: " .. tostring(m), 0) end
    tr.matcher = m
  elseif t.allow then
    error(where .. ".trigger.allow: only with keywords, regex or presets", 0)
  end
  if t.links ~= nil then
    local l = t.links
    if type(l) ~= "table" then error(where .. ".trigger.links: must be a table { deny = [...], allow = [...], max = n }", 0) end
    for k in pairs(l) do
      if k ~= "deny" and k ~= "allow" and k ~= "max" then
        error(where .. ".trigger.links: unknown field '" .. tostring(k) .. "' (known: allow, deny, max)", 0)
      end
    end
    local function domains(list, key)
      if list == nil then return nil end
      if type(list) ~= "table" then error(where .. ".trigger.links." .. key .. ": must be a list of domains", 0) end
      local out = {}
      for _, d in ipairs(list) do
        if type(d) ~= "string" or not d:match("^[%w%-%.]+$") then
          error(where .. ".trigger.links." .. key .. ": '" .. tostring(d) .. "' is not a domain such as example.com", 0)
        end
        out[#out + 1] = d:lower()
      end
      return out
    end
    tr.links = { deny = domains(l.deny, "deny"), allow = domains(l.allow, "allow"),
                 max = l.max and number(l.max, "links.max") or nil }
  end
  if t.mentions then tr.mentions = number(t.mentions, "mentions") end
  if t.emoji then tr.emoji = number(t.emoji, "emoji") end
  if t.zalgo then tr.zalgo = number(t.zalgo, "zalgo") end
  if t.rate then
    if type(t.rate) ~= "table" then error(where .. ".trigger.rate: must be { messages = n, seconds = t }", 0) end
    tr.rate = { messages = number(t.rate.messages, "rate.messages", 1), seconds = number(t.rate.seconds, "rate.seconds", 1) }
  end
  if t.duplicates then
    local d = t.duplicates
    if type(d) ~= "table" then error(where .. ".trigger.duplicates: must be { count = n, seconds = t }", 0) end
    tr.duplicates = { count = number(d.count, "duplicates.count", 2), seconds = number(d.seconds, "duplicates.seconds", 1),
                      across = d.across == true, min_length = d.min_length and number(d.min_length, "duplicates.min_length") or 1 }
  end
  if t.caps then
    local cp = t.caps
    if type(cp) ~= "table" then error(where .. ".trigger.caps: must be { ratio = 0.8, min_length = 20 }", 0) end
    local ratio = number(cp.ratio, "caps.ratio")
    if ratio > 1 then error(where .. ".trigger.caps.ratio: must be a fraction between 0 and 1", 0) end
    tr.caps = { ratio = ratio, min_length = cp.min_length and number(cp.min_length, "caps.min_length") or 10 }
  end
  -- actions
  local list = r.actions or r.action or { "block", "strike" }
  if type(list) == "string" then list = { list } end
  if type(list) ~= "table" or #list == 0 then error(where .. ".actions: must be a list such as [\"block\", \"strike\"]", 0) end
  rule.actions, rule.action_names = {}, {}
  for _, a in ipairs(list) do
    if not ACTIONS[a] then error(where .. ".actions: unknown action '" .. tostring(a) .. "' (known: " .. keys_of(ACTIONS) .. ")", 0) end
    rule.actions[a] = true
    rule.action_names[#rule.action_names + 1] = a
  end
  if rule.actions.mute then
    local s, err = duration(r.mute or (ctx.config.mute_minutes * 60))
    if not s then error(where .. ".mute: " .. err, 0) end
    if s > MAX_MUTE then error(where .. ".mute: at most 4 weeks (\"4w\")", 0) end
    rule.mute = s
  elseif r.mute ~= nil then
    error(where .. ".mute: only with the mute action", 0)
  end
  local function cids(v, key)
    if v == nil then return nil end
    if type(v) ~= "table" then error(where .. "." .. key .. ": must be a list of conversation ids", 0) end
    return set_of(v)
  end
  rule.conversations = cids(r.conversations, "conversations")
  rule.exempt_conversations = cids(r.exempt_conversations, "exempt_conversations")
  if r.exempt_roles ~= nil and type(r.exempt_roles) ~= "table" then
    error(where .. ".exempt_roles: must be a list of roles (owner, manager or a [roles] role)", 0)
  end
  rule.exempt_roles = r.exempt_roles
  if r.new_members ~= nil then
    local nm = r.new_members
    if type(nm) ~= "table" or (nm.minutes == nil and nm.messages == nil) then
      error(where .. ".new_members: must be { minutes = n, messages = m } (either or both)", 0)
    end
    for k in pairs(nm) do
      if k ~= "minutes" and k ~= "messages" then
        error(where .. ".new_members: unknown field '" .. tostring(k) .. "' (known: messages, minutes)", 0)
      end
    end
    rule.new_members = { minutes = nm.minutes and number(nm.minutes, "new_members.minutes"),
                         messages = nm.messages and number(nm.messages, "new_members.messages") }
  end
  return rule
end

local function parse_ladder(c)
  local out = {}
  if type(c.ladder) ~= "table" or #c.ladder == 0 then
    error("plugins.moderation.ladder: must be a list such as [\"warn\", \"mute 10m\", \"mute 1d\", \"kick\"]", 0)
  end
  for i, step in ipairs(c.ladder) do
    local action, arg = tostring(step):match("^%s*(%a+)%s*(.-)%s*$")
    local s
    if action == "mute" then
      local err
      s, err = duration(arg ~= "" and arg or c.mute_minutes * 60)
      if not s then error("plugins.moderation.ladder[" .. i .. "]: " .. err, 0) end
      if s > MAX_MUTE then error("plugins.moderation.ladder[" .. i .. "]: a mute of at most 4 weeks (\"4w\")", 0) end
    elseif not (action == "warn" or action == "kick" or action == "ban") or arg ~= "" then
      error("plugins.moderation.ladder[" .. i .. "]: '" .. tostring(step) .. "' is not warn, mute [duration], kick or ban", 0)
    end
    out[i] = { action = action, seconds = s }
  end
  return out
end

local function is_exempt(ctx, uid)
  return exempt[uid] or moderators[uid]
end

local function when(ctx, t)
  local ago = math.max(0, math.floor(ctx.now() - (t or 0)))
  if ago < 60 then return ago .. " s ago" end
  if ago < 3600 then return (ago // 60) .. " min ago" end
  if ago < 86400 then return (ago // 3600) .. " h ago" end
  return (ago // 86400) .. " d ago"
end

-- Lifts what the plugin did to `user` in `cid`: strikes, its mute record and the server's mute, the ban of
-- a kick (re-adding the member) and the server's block list.
local function pardon(ctx, cid, user, by)
  local conv = ctx.state.conv(cid)
  local was_banned = conv.get("banned:" .. user)
  conv.delete("strikes:" .. user)
  set_muted(ctx, cid, user, nil)
  conv.delete("banned:" .. user)
  -- Mutes are the server's: lifting one there lets the user speak at once (SDK clients see it too).
  ctx.conv(cid).unmute(user, "pardoned by " .. by)
  if was_banned then ctx.add(cid, user) end
  return was_banned
end

-- The mod command (`!mod …` declared with ctx.commands, or a `mod` cmd message); `reply` answers the
-- moderator.
local function mod_command(ctx, cid, from, args, reply)
  local mod = ctx.commands.prefix .. "mod"
  local sub, user, value = args.command, args.user, args.value
  local conv = ctx.state.conv(cid)
  if sub == "unban" or sub == "pardon" then
    if not user or user == "" then return reply("usage: " .. mod .. " " .. sub .. " <user> [conversation]") end
    local where = { [value or cid] = true }
    if not value then
      -- A member sanctioned elsewhere (a mute keeps them from writing where it happened) is pardoned there too.
      for _, e in ipairs(modlog and modlog.recent(ctx, { target = user, limit = 50 }) or {}) do
        if e.cid and e.plugin == ctx.plugin then where[e.cid] = true end
      end
    end
    local list = {}
    for c in pairs(where) do list[#list + 1] = c end
    table.sort(list)
    for _, c in ipairs(list) do pardon(ctx, c, user, from) end
    audit(ctx, { cid = cid, user = user, action = "unban", by = from })
    local closed = 0
    for _, id in ipairs(ctx.state.get("appeals_open:" .. user) or {}) do
      local a = ctx.state.get("appeal:" .. id)
      if a and a.open then
        a.open, a.resolved_by = false, from
        ctx.state.set("appeal:" .. id, a)
        closed = closed + 1
      end
    end
    ctx.state.delete("appeals_open:" .. user)
    post(ctx, { action = "pardon", target = user, cid = cid, by = from,
                reason = closed > 0 and (closed .. " appeal(s) granted") or nil })
    if sub == "unban" then return reply(user .. " is unbanned; strikes cleared") end
    return reply(user .. " is pardoned in " .. table.concat(list, ", ") .. ": strikes cleared, mute lifted"
      .. (closed > 0 and ("; " .. closed .. " appeal(s) closed") or ""))
  elseif sub == "strikes" then
    if not user or user == "" then return reply("usage: " .. mod .. " strikes <user>") end
    return reply(user .. " has " .. #live_strikes(ctx, cid, user, ctx.now()) .. " strike(s)")
  elseif sub == "history" then
    if not user or user == "" then return reply("usage: " .. mod .. " history <user>") end
    local entries = modlog and modlog.recent(ctx, { target = user, limit = tonumber(value) or 10 }) or {}
    if #entries == 0 then return reply("no moderation history for " .. user) end
    local lines = { user .. ", newest first:" }
    for _, e in ipairs(entries) do lines[#lines + 1] = when(ctx, e.at) .. ": " .. modlog.format(e) end
    return reply(table.concat(lines, "\n"))
  elseif sub == "rules" then
    local lines = {}
    for _, r in ipairs(rules) do
      if r.off then goto continue end
      lines[#lines + 1] = string.format("%s: %d hit(s), %s%s%s", r.name, ctx.state.get("hits:" .. r.name) or 0,
        table.concat(r.action_names, "+"), r.legacy and " (built in)" or "", dry(ctx, r) and " [dry run]" or "")
      ::continue::
    end
    if #lines == 0 then return reply("no rules") end
    return reply(table.concat(lines, "\n"))
  elseif sub == "dryrun" then
    local rule = user and by_name[user]
    if not rule or (value ~= "on" and value ~= "off") then
      return reply("usage: " .. mod .. " dryrun <rule> on|off" .. (user and not rule and (" (no rule " .. user .. ")") or ""))
    end
    ctx.state.set("dryrun:" .. rule.name, value == "on")
    post(ctx, { action = "dryrun " .. value, rule = rule.name, by = from,
                undo = mod .. " dryrun " .. rule.name .. (value == "on" and " off" or " on") })
    return reply("rule " .. rule.name .. ": dry run " .. value)
  elseif sub == "appeals" then
    local ids = ctx.state.get("appeals") or {}
    local lines = {}
    for i = #ids, 1, -1 do
      local a = ctx.state.get("appeal:" .. ids[i])
      if a and a.open then lines[#lines + 1] = "#" .. ids[i] .. " " .. a.user .. " (" .. when(ctx, a.at) .. "): " .. a.text end
      if #lines >= 10 then break end
    end
    if #lines == 0 then return reply("no open appeals") end
    return reply(table.concat(lines, "\n"))
  elseif sub == "stats" then
    local parts = {}
    for i, r in ipairs(LEGACY) do
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
  return reply(string.format("usage: %s pardon <user> | history <user> | rules | dryrun <rule> on|off | appeals | "
    .. "strikes <user> | stats | audit [n] | unban <user>", mod))
end

-- !appeal <text>: a member with a recent sanction asks the moderators to look again.
local function appeal(args, msg, ctx)
  local uid, now = msg.from, ctx.now()
  local since = now - ctx.config.appeal_days * 86400
  local last = modlog and modlog.recent(ctx, { target = uid, since = since, limit = 5 }) or {}
  local sanction
  for _, e in ipairs(last) do
    local what = tostring(e.action)
    if not e.dry_run and what ~= "alert" and what ~= "pardon" and what:sub(1, 6) ~= "appeal" then sanction = e; break end
  end
  if not sanction then return ctx.reply(tr(ctx, "appeal.none", nil, "you have no recent moderation action to appeal")) end
  local open = ctx.state.get("appeals_open:" .. uid) or {}
  if #open >= 3 then return ctx.reply(tr(ctx, "appeal.too_many", { n = #open }, "you have {n} open appeals; the moderators will answer")) end
  local id = ctx.state.incr("appeal_seq")
  ctx.state.set("appeal:" .. id, { user = uid, text = args.text, at = now, cid = msg.cid, open = true,
                                   about = sanction.rule or sanction.action })
  local ids = ctx.state.get("appeals") or {}
  ids[#ids + 1] = id
  while #ids > 200 do table.remove(ids, 1) end
  ctx.state.set("appeals", ids)
  open[#open + 1] = id
  ctx.state.set("appeals_open:" .. uid, open)
  post(ctx, { action = "appeal #" .. id, target = uid, cid = sanction.cid, rule = sanction.rule, reason = args.text,
              by = uid, undo = ctx.commands.prefix .. "mod pardon " .. uid, appeal = id })
  ctx.reply(tr(ctx, "appeal.sent", { id = id }, "appeal #{id} sent to the moderators"))
end

local DEFAULT_RULES = {
  { name = "scam", trigger = { presets = { "scam" }, links = { deny = { "grabify.link", "iplogger.org", "iplogger.com",
      "2no.co", "blasze.com", "yip.su" } } },
    actions = { "block", "strike", "alert" }, message = "that looks like a scam" },
  { name = "profanity", trigger = { presets = { "en/profanity", "zh/profanity" } }, actions = { "warn" },
    message = "please mind your language" },
  { name = "new-member-mentions", trigger = { mentions = 2 }, new_members = { minutes = 60, messages = 5 },
    actions = { "block", "strike" }, message = "new members cannot mention more than 2 people yet" },
  { name = "new-member-links", trigger = { links = { max = 0 } }, new_members = { minutes = 10, messages = 3 },
    actions = { "block" }, message = "new members cannot post links yet" },
  { name = "repeats", trigger = { duplicates = { count = 3, seconds = 60, min_length = 20 } },
    actions = { "block", "strike" }, message = "please do not repeat yourself" },
  { name = "spam-wave", trigger = { duplicates = { count = 5, seconds = 60, across = true, min_length = 12 } },
    new_members = { minutes = 60, messages = 5 },
    actions = { "block", "strike", "alert" }, message = "this message is being posted by many new members" },
  -- In dry run: plenty of friendly messages are shouted (5.6 % of the benign corpus); see the mod-log first.
  { name = "caps", trigger = { caps = { ratio = 0.8, min_length = 24 } }, actions = { "block" },
    message = "please do not write in capitals", dry_run = true },
  { name = "emoji-flood", trigger = { emoji = 30 }, actions = { "block" }, message = "too many emoji" },
  { name = "zalgo", trigger = { zalgo = 20 }, actions = { "block", "strike" }, message = "that text is unreadable" },
}

return {
  name = "moderation",
  priority = 100,
  config = {
    rules = DEFAULT_RULES,  -- the rules engine (docs/MODERATION.md); checked after the built-in rules below
    words = {},             -- banned words or phrases, compared after normalisation (built-in rule `word`)
    substring = false,      -- true: a word also matches inside longer words
    patterns = {},          -- Lua patterns on the lowercased text (built-in rule `pattern`)
    max_links = 3,          -- false disables
    max_mentions = 5,       -- false disables
    flood = { messages = 5, seconds = 10 }, -- false disables
    ladder = { "warn", "mute", "kick" },    -- what the 1st, 2nd, 3rd... strike does ("mute 1d", "ban" too)
    mute_minutes = 10,      -- a "mute" step or action without its own duration
    strike_ttl = 86400,     -- each strike is forgotten this many seconds after it was given (0: never)
    moderators = {},        -- hold the moderator role (!mod) and are not moderated
    exempt = { "modbot" },  -- never moderated (the bot's own client id belongs here)
    exempt_roles = { "moderator" }, -- holders of these roles are not moderated by `rules`
    modlog = false,         -- conversation id of the mod-log (every action is posted there)
    modlog_keep = 500,      -- mod-log entries kept in state (!mod history reads them)
    appeal_days = 30,       -- !appeal is open to members sanctioned within this many days
    recall_blocked = false, -- true: also recall messages `delete` hits (a bot that is not the interceptor)
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
    windows, dups, muted_cache, joins, conv_api = {}, {}, {}, {}, {}
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
    if c.modlog and type(c.modlog) ~= "string" then
      error("plugins.moderation.modlog: must be a conversation id (or false)", 0)
    end
    ladder = parse_ladder(c)
    -- The built-in rules first (in the order they are checked), then the configured ones.
    rules, custom, by_name, legacy_rule = {}, {}, {}, {}
    member_api = ctx.conv("-").member ~= nil
    appeal_prefix = ctx.commands.prefix .. "appeal"
    local remembers_joins = false
    for _, name in ipairs(LEGACY) do
      local r = { name = name, legacy = true, actions = { block = true, strike = true }, action_names = { "block", "strike" },
                  message = c.reasons[name] or name, dry_run = false }
      legacy_rule[name] = r
    end
    legacy_rule.flood.off = not (c.flood and c.flood.messages)
    legacy_rule.links.off = not c.max_links
    legacy_rule.mentions.off = not c.max_mentions
    legacy_rule.word.off = #words == 0
    legacy_rule.pattern.off = #patterns == 0
    for _, name in ipairs({ "flood", "links", "mentions", "word", "pattern" }) do
      rules[#rules + 1] = legacy_rule[name]
      by_name[name] = legacy_rule[name]
    end
    if type(c.rules) ~= "table" then error("plugins.moderation.rules: must be a list of rules", 0) end
    for i, r in ipairs(c.rules) do
      local rule = parse_rule(i, r, ctx)
      if by_name[rule.name] then
        error("plugins.moderation.rules[" .. i .. "]: a rule named " .. rule.name .. " already exists", 0)
      end
      rule.exempt_roles = rule.exempt_roles or c.exempt_roles
      rules[#rules + 1] = rule
      custom[#custom + 1] = rule
      by_name[rule.name] = rule
      if rule.new_members then remembers_joins = true end
    end
    join_keep = math.max((c.new_member_minutes or 0) * 60, (remembers_joins and not member_api) and 7 * 86400 or 0)
    if ctx.bot then exempt[ctx.bot] = true end
    -- Configured moderators hold the role the command needs; more can be granted with ctx.roles or [roles].
    for uid in pairs(moderators) do ctx.roles.grant(uid, "moderator") end
    ctx.commands.add{
      name = "mod", args = "[action] [target] [value]", roles = { "moderator" },
      description = "pardon <user>, history <user>, rules, dryrun <rule> on|off, appeals, stats",
      run = function(args, msg, ctx)
        mod_command(ctx, msg.cid, msg.from, { command = args.action, user = args.target, value = args.value }, ctx.reply)
      end,
    }
    ctx.commands.add{
      name = "appeal", args = "<text:text>", cooldown = 60,
      description = "ask the moderators to look again at an action taken against you",
      run = appeal,
    }
  end,

  moderation = function(msg, ctx)
    local uid, cid = msg.from, msg.cid
    if is_exempt(ctx, uid) then return nil end
    local now = ctx.now()
    if muted_until(ctx, cid, uid, now) then
      -- A muted member may still appeal (where the bot is not the interceptor, it enforces its own mutes).
      local t = msg.text
      if t and t:sub(1, #appeal_prefix) == appeal_prefix then return nil end
      return ctx.block(told(ctx, "muted", ctx.config.reasons.muted or "you are muted"), { code = ctx.config.code, silent = true })
    end
    local m = { text = msg.text and msg.text:sub(1, ctx.config.max_scan) or "" }
    local name = legacy_violation(msg, ctx, now, m)
    if name then
      local v = enforce(legacy_rule[name], msg, ctx, legacy_rule[name].message, now)
      if v then return v end
    end
    for _, rule in ipairs(custom) do
      if applies(rule, msg) and (not rule.new_members or is_new(ctx, cid, uid, rule.new_members, now, m)) then
        local hit, why = fires(rule, msg, ctx, m, now)
        if hit and not (rule.exempt_roles and #rule.exempt_roles > 0 and holds(ctx, cid, uid, rule.exempt_roles)) then
          local v = enforce(rule, msg, ctx, why, now)
          if v then return v end
        end
      end
    end
    return nil
  end,

  on_cmd = function(cmd, ctx)
    if cmd.action ~= "mod" then return end
    local send = function(text) ctx.send(cmd.cid, text) end
    if not (moderators[cmd.from] or ctx.roles.has(cmd.from, "moderator")) then
      return send(ctx.commands.prefix .. "mod is only for moderator")
    end
    mod_command(ctx, cmd.cid, cmd.from, cmd.ext, send)
  end,

  on_member_joined = function(ev, ctx)
    -- Join times for new_member_minutes, and for new_members rules when the host has no member records
    -- (kept a week then). Founders of a conversation are not joiners.
    for _, uid in ipairs(ev.members) do
      if join_keep > 0 and not ev.founding then
        ctx.state.conv(ev.cid).set("joined:" .. uid, ctx.now(), join_keep)
        if joins[ev.cid] then joins[ev.cid][uid] = ctx.now() end
      end
      if ctx.state.conv(ev.cid).get("banned:" .. uid) then
        ctx.kick(ev.cid, uid, "banned")
        audit(ctx, { cid = ev.cid, user = uid, action = "kick", rule = "banned" })
        post(ctx, { action = "kick", target = uid, cid = ev.cid, rule = "banned", reason = "rejoined after a kick",
                    by = ctx.bot or "moderation", undo = ctx.commands.prefix .. "mod pardon " .. uid .. " " .. ev.cid })
      end
    end
  end,
}
