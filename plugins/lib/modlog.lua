-- The moderators' log shared by the moderation plugins (moderation, gatekeeper,
-- banlist, reports): every action is kept in the plugin's state (the newest
-- `keep` entries, 500 by default) and, when the plugin's config names a
-- conversation in `modlog`, posted there with who, why, which rule and how to
-- undo it.
--
--   local modlog = require("modlog")
--   modlog.post(ctx, { action = "mute", target = "Tom", cid = "lobby",
--     rule = "links", reason = "3 links in 10 s", by = "automod",
--     undo = "!mod unmute Tom lobby", dry_run = false })  --> entry with id, at
--   modlog.recent(ctx, { target = "Tom", limit = 20 }) --> newest first

local M = {}

local KEY = "modlog"

local function keep(ctx)
  local n = ctx.config and tonumber(ctx.config.modlog_keep) or nil
  return n and n > 0 and math.floor(n) or 500
end

-- One line for people: "[dry run] mute Tom in lobby (rule links: 3 links in
-- 10 s) by automod — undo: !mod unmute Tom lobby".
function M.format(e)
  local parts = {}
  if e.dry_run then parts[#parts + 1] = "[dry run]" end
  parts[#parts + 1] = tostring(e.action or "action")
  if e.target then parts[#parts + 1] = tostring(e.target) end
  if e.cid then parts[#parts + 1] = "in " .. tostring(e.cid) end
  local why = {}
  if e.rule then why[#why + 1] = "rule " .. tostring(e.rule) end
  if e.reason then why[#why + 1] = tostring(e.reason) end
  if #why > 0 then parts[#parts + 1] = "(" .. table.concat(why, ": ") .. ")" end
  if e.by then parts[#parts + 1] = "by " .. tostring(e.by) end
  local line = table.concat(parts, " ")
  if e.undo and not e.dry_run then line = line .. " — undo: " .. tostring(e.undo) end
  return line
end

-- Records an entry (adds `at`, the runtime clock in seconds, and `id`, a
-- number that is the plugin's own and never reused, which the console's
-- moderation page names the entry by) and posts it to the mod-log
-- conversation if one is configured. Returns the entry.
function M.post(ctx, e)
  local entry = {}
  for k, v in pairs(e) do entry[k] = v end
  entry.at = entry.at or ctx.now()
  entry.id = entry.id or ctx.state.incr(KEY .. "_seq")
  entry.plugin = ctx.plugin
  local list = ctx.state.get(KEY) or {}
  list[#list + 1] = entry
  local limit = keep(ctx)
  if #list > limit then
    local trimmed = {}
    for i = #list - limit + 1, #list do trimmed[#trimmed + 1] = list[i] end
    list = trimmed
  end
  ctx.state.set(KEY, list)
  local where = ctx.config and ctx.config.modlog
  if type(where) == "string" and where ~= "" then
    -- The bot may not be a member of the mod-log conversation: say so in the
    -- log instead of failing the hook that took the action.
    local ok, err = pcall(ctx.send, where, M.format(entry))
    if not ok then ctx.log("warning", "modlog: " .. tostring(err)) end
  end
  return entry
end

-- The newest entries first, filtered by any of `target`, `cid`, `action`,
-- `rule`, `since` (seconds); at most `limit` (20).
function M.recent(ctx, filter)
  filter = filter or {}
  local out, limit = {}, filter.limit or 20
  local list = ctx.state.get(KEY) or {}
  for i = #list, 1, -1 do
    local e = list[i]
    if (not filter.target or e.target == filter.target)
      and (not filter.cid or e.cid == filter.cid)
      and (not filter.action or e.action == filter.action)
      and (not filter.rule or e.rule == filter.rule)
      and (not filter.since or (e.at or 0) >= filter.since) then
      out[#out + 1] = e
      if #out >= limit then break end
    end
  end
  return out
end

return M
