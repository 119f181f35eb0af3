-- Reports: any member reports a message (`!report [reason]` sent as a reply to it, or `!report
-- <message id> <reason>`) or a member (`!report @user <reason>`). Each report counts with its
-- reporter's weight: moderators and trusted reporters (the `trusted_role`, or members of the
-- conversation for `trusted_days` with no upheld report against them) count more. When a message's
-- reports reach `threshold` it is recalled, pending review, and the moderators are alerted in the
-- mod-log with the report's number; reports against a member alert them at `user_threshold`.
-- Moderators resolve with `!reports` and `!resolve <n> dismiss|uphold [warn|mute [minutes]|kick|ban]`:
-- uphold acts through the server (warn, timed mute, kick, the conversation's block list); dismiss
-- re-posts a recalled message's text (`restore`).
--
-- Reports against moderators (and the owners' `admin_role`) are never acted on automatically: they
-- go to the `admin_role` only (posted to `admin_log`, listed and resolved by its holders), not to the
-- moderators' log.
--
-- Which message a reply answers: a client puts the id of the message it replies to in the reply's
-- attributes, `attrs.reply_to = "<message id>"` (or `{id = …, from = …}`). LeanCloud has no reply
-- field of its own. The plugin remembers the authors of the last `remember` messages of each
-- conversation (in memory), so a report of an older message names its author: `!report @user`.

local modlog = require("modlog")

local recent = {}        -- cid -> { order = {ids}, by = {id -> {from, text}} }
local tracked = 0        -- conversations in `recent`
local moderators = {}

local function set_of(list)
  local s = {}
  for _, v in ipairs(list or {}) do s[v] = true end
  return s
end

local function excerpt(text, n)
  text = (text or ""):gsub("%s+", " ")
  if #text > n then
    -- cut on a UTF-8 boundary
    local cut = n
    while cut > 0 and text:byte(cut + 1) and text:byte(cut + 1) >= 0x80 and text:byte(cut + 1) < 0xC0 do cut = cut - 1 end
    return text:sub(1, cut) .. "…"
  end
  return text
end

local function remember(ctx, msg)
  local r = recent[msg.cid]
  if not r then
    if tracked >= 500 then recent, tracked = {}, 0 end
    r = { order = {}, by = {} }
    recent[msg.cid] = r
    tracked = tracked + 1
  end
  if r.by[msg.id] then return end
  r.order[#r.order + 1] = msg.id
  r.by[msg.id] = { from = msg.from, text = excerpt(msg.text or ("[" .. (msg.type_name or "message") .. "]"), 200) }
  local keep = ctx.config.remember
  if #r.order > keep * 2 then
    local order = {}
    for i = #r.order - keep + 1, #r.order do order[#order + 1] = r.order[i] end
    for i = 1, #r.order - keep do r.by[r.order[i]] = nil end
    r.order = order
  end
end

local function is_admin(ctx, uid) return ctx.roles.has(uid, ctx.config.admin_role) end
local function is_moderator(ctx, uid)
  return moderators[uid] == true or ctx.roles.has(uid, "moderator") or is_admin(ctx, uid)
end

-- How long `uid` has been a member of `cid`, in days, if the host knows (ctx.conv(cid).member).
local function member_days(ctx, cid, uid)
  local conv = ctx.conv(cid)
  if type(conv.member) ~= "function" then return nil end
  local ok, info = pcall(conv.member, uid)
  if not ok or type(info) ~= "table" or not info.joined_at then return nil end
  return (ctx.now() - info.joined_at) / 86400
end

local function weight(ctx, cid, uid)
  local w = ctx.config.weights
  if is_moderator(ctx, uid) then return w.moderator, "moderator" end
  if ctx.roles.has(uid, ctx.config.trusted_role) then return w.trusted, "trusted" end
  local days = ctx.config.trusted_days
  if days and days > 0 and not ctx.state.get("sanction:" .. uid) then
    local member = member_days(ctx, cid, uid)
    if member and member >= days then return w.trusted, "trusted" end
  end
  return w.member, "member"
end

local function keep_seconds(ctx) return ctx.config.keep_days * 86400 end

local function save(ctx, r) ctx.state.set("report:" .. r.id, r, keep_seconds(ctx)) end

local function summary(ctx, r)
  local what = r.msg and ctx.t("summary.message", { id = r.msg, user = r.user }) or ctx.t("summary.member", { user = r.user })
  local n = 0
  for _ in pairs(r.reporters) do n = n + 1 end
  local line = ctx.t("summary.line", { id = r.id, status = ctx.t("status." .. r.status), what = what, cid = r.cid,
    score = tostring(r.score), count = n })
  if #r.reasons > 0 then line = line .. ctx.t("summary.reasons", { reasons = table.concat(r.reasons, "; ") }) end
  if r.text then line = line .. ctx.t("summary.text", { text = excerpt(r.text, 60) }) end
  return line
end

-- Alerts whoever reviews this report: the admins for a report against a moderator, else the mod-log.
local function alert(ctx, r, action, reason)
  if r.against_mod then
    local line = "report #" .. r.id .. " against " .. r.user .. " (a moderator) in " .. r.cid .. ": " .. reason
    ctx.log("notice", "reports: " .. line)
    local where = ctx.config.admin_log
    if type(where) == "string" and where ~= "" then
      local ok, err = pcall(ctx.send, where, line)
      if not ok then ctx.log("warning", "reports: " .. tostring(err)) end
    end
    return
  end
  modlog.post(ctx, { action = action, target = r.user, cid = r.cid, rule = "report #" .. r.id, reason = reason,
    by = "reports", undo = r.status == "hidden" and (ctx.commands.prefix .. "resolve " .. r.id .. " dismiss") or nil })
end

local function report_command(args, msg, ctx)
  local c = ctx.config
  local text = (args.text or ""):match("^%s*(.-)%s*$")
  local ref = msg.attrs and msg.attrs.reply_to
  local target_msg, author, reason
  if type(ref) == "table" then
    target_msg, author, reason = ref.id, ref.from, text
  elseif type(ref) == "string" and ref ~= "" then
    target_msg, reason = ref, text
  else
    local first, rest = text:match("^(%S+)%s*(.*)$")
    if first and first:sub(1, 1) == "@" and #first > 1 then
      author, reason = first:sub(2), rest
    elseif first and recent[msg.cid] and recent[msg.cid].by[first] then
      target_msg, reason = first, rest
    else
      return ctx.reply(ctx.t("report.usage", { prefix = ctx.commands.prefix }))
    end
  end
  local seen = target_msg and recent[msg.cid] and recent[msg.cid].by[target_msg]
  if target_msg then
    author = (seen and seen.from) or author
    if type(target_msg) ~= "string" or type(author) ~= "string" then
      return ctx.reply(ctx.t("report.unknown_author", { prefix = ctx.commands.prefix }))
    end
  end
  if author == msg.from then return ctx.reply(ctx.t("report.self")) end
  if author == ctx.bot then return ctx.reply(ctx.t("report.bot")) end
  reason = excerpt(reason or "", 200)

  local key = target_msg and ("msg:" .. msg.cid .. ":" .. target_msg) or ("user:" .. msg.cid .. ":" .. author)
  local id = ctx.state.get(key)
  local r = id and ctx.state.get("report:" .. id)
  if r and (r.status == "upheld" or r.status == "dismissed") and target_msg then
    return ctx.reply(ctx.t("report.reviewed", { id = r.id, status = ctx.t("status." .. r.status) }))
  end
  if r and (r.status == "upheld" or r.status == "dismissed") then r = nil end -- a member: a new report
  if r and r.reporters[msg.from] then
    return ctx.reply(target_msg and ctx.t("report.again_message", { id = r.id })
      or ctx.t("report.again_member", { id = r.id, user = author }))
  end
  if not r then
    id = ctx.state.incr("next")
    r = { id = id, cid = msg.cid, msg = target_msg, user = author, text = seen and seen.text or nil,
          reporters = {}, reasons = {}, score = 0, status = "open", at = ctx.now(),
          against_mod = is_moderator(ctx, author) or nil }
    ctx.state.set(key, id, keep_seconds(ctx))
  end
  local w, kind = weight(ctx, msg.cid, msg.from)
  r.reporters[msg.from] = w
  r.score = r.score + w
  if reason ~= "" and #r.reasons < 10 then r.reasons[#r.reasons + 1] = reason end
  local threshold = target_msg and c.threshold or c.user_threshold
  local reached = r.status == "open" and not r.alerted and r.score >= threshold
  if reached then
    r.alerted = true
    if target_msg and not r.against_mod then
      ctx.recall(msg.cid, target_msg)
      r.status = "hidden"
    end
  end
  save(ctx, r)
  if reached then
    alert(ctx, r, r.status == "hidden" and "recall" or "alert",
      string.format("score %s ≥ %s: %s", tostring(r.score), tostring(threshold),
        #r.reasons > 0 and table.concat(r.reasons, "; ") or "no reason given"))
  end
  local said = ctx.t("report.noted", { id = r.id, kind = ctx.t("kind." .. kind), weight = tostring(w) })
  if r.status == "hidden" and reached then said = said .. ctx.t("report.hidden") end
  ctx.reply(said)
end

local function may_review(ctx, uid, r)
  if r.against_mod then return is_admin(ctx, uid) end
  return is_moderator(ctx, uid)
end

local function open_reports(ctx, uid, all)
  local out = {}
  for _, key in ipairs(ctx.state.keys("report:")) do
    local r = ctx.state.get(key)
    if type(r) == "table" and (all or r.status == "open" or r.status == "hidden") and may_review(ctx, uid, r) then
      out[#out + 1] = r
    end
  end
  table.sort(out, function(a, b) return a.id > b.id end)
  return out
end

local function reports_command(args, msg, ctx)
  local all = args.which == "all"
  local list = open_reports(ctx, msg.from, all)
  if #list == 0 then return ctx.reply(ctx.t(all and "list.none" or "list.none_open")) end
  local lines = {}
  for i = 1, math.min(#list, 20) do lines[#lines + 1] = summary(ctx, list[i]) end
  local head = ctx.t(all and "list.all" or "list.open", { count = #list }) .. (#list > 20 and ctx.t("list.newest", { count = 20 }) or "")
  ctx.reply(head .. ":\n" .. table.concat(lines, "\n"))
end

local ACTIONS = { warn = true, mute = true, kick = true, ban = true, none = true }

local function resolve_command(args, msg, ctx)
  local c = ctx.config
  local r = ctx.state.get("report:" .. args.id)
  if type(r) ~= "table" or not may_review(ctx, msg.from, r) then return ctx.reply(ctx.t("resolve.none", { id = args.id })) end
  if r.status == "upheld" or r.status == "dismissed" then
    return ctx.reply(ctx.t("resolve.already", { id = r.id, status = ctx.t("status." .. r.status), by = tostring(r.resolved_by) }))
  end
  local decision = args.decision
  if decision == "dismiss" then
    if args.action then return ctx.reply(ctx.t("resolve.dismiss_action")) end
    local was_hidden = r.status == "hidden"
    r.status, r.resolved_by, r.resolved_at = "dismissed", msg.from, ctx.now()
    save(ctx, r)
    if was_hidden and c.restore and r.text then
      ctx.send(r.cid, ctx.t("resolve.restored_post", { user = r.user, text = r.text }, { conv = r.cid }))
    end
    if not r.against_mod then
      modlog.post(ctx, { action = "dismiss", target = r.user, cid = r.cid, rule = "report #" .. r.id, by = msg.from })
    end
    return ctx.reply(ctx.t("resolve.dismissed", { id = r.id })
      .. ((was_hidden and c.restore and r.text) and ctx.t("resolve.restored") or ""))
  elseif decision ~= "uphold" then
    return ctx.reply(ctx.t("resolve.usage", { prefix = ctx.commands.prefix }))
  end
  local action = args.action or "none"
  if not ACTIONS[action] then
    return ctx.reply(ctx.t("resolve.bad_action", { action = excerpt(action, 40) }))
  end
  if args.minutes and action ~= "mute" then return ctx.reply(ctx.t("resolve.minutes_only_mute")) end
  local minutes = args.minutes or c.mute_minutes
  if minutes < 1 or minutes > 40320 then return ctx.reply(ctx.t("resolve.minutes_range")) end
  local reason = "report #" .. r.id .. (#r.reasons > 0 and (": " .. r.reasons[1]) or "")
  if r.msg and r.status ~= "hidden" then ctx.recall(r.cid, r.msg) end
  if action == "warn" then ctx.warn(r.cid, r.user, reason)
  elseif action == "mute" then ctx.conv(r.cid).mute(r.user, minutes * 60, reason)
  elseif action == "kick" then ctx.kick(r.cid, r.user, reason)
  elseif action == "ban" then ctx.conv(r.cid).block(r.user)
  end
  r.status, r.resolved_by, r.resolved_at, r.action = "upheld", msg.from, ctx.now(), action
  save(ctx, r)
  -- A sanction: the member is not a trusted reporter for trusted_days.
  ctx.state.set("sanction:" .. r.user, ctx.now(), math.max(c.trusted_days, 1) * 86400)
  local done = action == "mute" and ("mute " .. minutes .. " min") or action
  local undo = ({ mute = "unmute " .. r.user .. " in " .. r.cid, ban = "unblock " .. r.user .. " in " .. r.cid,
                  kick = "add " .. r.user .. " back to " .. r.cid })[action]
  if not r.against_mod then
    modlog.post(ctx, { action = "uphold" .. (action ~= "none" and (" + " .. done) or ""), target = r.user, cid = r.cid,
      rule = "report #" .. r.id, reason = r.reasons[1], by = msg.from, undo = undo })
  end
  if action == "none" then return ctx.reply(ctx.t("resolve.upheld", { id = r.id })) end
  ctx.reply(ctx.t("resolve.upheld_action", { id = r.id, user = r.user,
    action = ctx.t("action." .. action, { minutes = minutes }) }))
end

return {
  name = "reports",
  config = {
    moderators = {},       -- hold the moderator role (as do [roles] moderator)
    threshold = 3,         -- report weight that hides (recalls) a message pending review
    user_threshold = 5,    -- report weight against a member that alerts the moderators
    weights = { member = 1, trusted = 2, moderator = 3 },
    trusted = {},          -- hold the trusted role (as do [roles] trusted)
    trusted_role = "trusted", -- holders report with the trusted weight
    trusted_days = 30,     -- members this long in the conversation with no upheld report are trusted (0: off)
    admin_role = "admin",  -- reviews reports against moderators (nobody else sees them)
    admin_log = false,     -- conversation reports against moderators are posted to
    mute_minutes = 60,     -- uphold mute without minutes
    restore = true,        -- a dismissed report re-posts the hidden message's text
    remember = 200,        -- messages remembered per conversation for reports
    keep_days = 30,        -- reports kept this long
    modlog = false,        -- conversation the moderators' log is posted to
  },

  on_load = function(ctx)
    local c = ctx.config
    for _, k in ipairs({ "member", "trusted", "moderator" }) do
      if type(c.weights[k]) ~= "number" or c.weights[k] < 0 then
        error("plugins.reports.weights." .. k .. ": a number, 0 or more", 0)
      end
    end
    if c.threshold <= 0 or c.user_threshold <= 0 then error("plugins.reports.threshold: more than 0", 0) end
    moderators = set_of(c.moderators)
    for uid in pairs(moderators) do ctx.roles.grant(uid, "moderator") end
    for _, uid in ipairs(c.trusted) do ctx.roles.grant(uid, c.trusted_role) end
    local reviewers = { "moderator", c.admin_role }
    ctx.commands.add{ name = "report", args = "[text:text]",
      description = "report a message (send it as a reply) or a member: !report [message id|@user] reason",
      run = report_command }
    ctx.commands.add{ name = "reports", args = "[which]", roles = reviewers,
      description = "open reports (all: resolved ones too)", run = reports_command }
    ctx.commands.add{ name = "resolve", args = "<id:integer> <decision> [action] [minutes:integer]", roles = reviewers,
      description = "dismiss, or uphold with warn, mute [minutes], kick or ban", run = resolve_command }
  end,

  on_receive = function(msg, ctx)
    if msg.id and msg.id ~= "" then remember(ctx, msg) end
  end,
}
