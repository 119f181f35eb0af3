-- Auto-replies: exact, keyword and pattern rules with templated replies, an
-- FAQ (inline or a module in lib/ named by `faq_module`), a cooldown per rule
-- and conversation, and an "only when mentioned" option.
--
-- Templates: {from}, {conversation}, {text}, and {1}..{9} for the captures
-- of a `pattern` rule (Lua patterns, not regular expressions).
--
-- A rule's `reply` is used as it is; a rule with `reply_key` (and an FAQ entry with `answer_key`) answers
-- with that key of plugins/locales/autoreply/<locale>.toml in the language of the member who wrote
-- (`!lang`, their client's attrs.lang), with the same placeholders.

local text_util = require("text")

local function lower_trim(s) return text_util.trim(s:lower()) end

local function render(template, vars)
  return (template:gsub("{(%w+)}", function(key)
    local v = vars[key] or vars[tonumber(key)]
    if v == nil then return "{" .. key .. "}" end
    return tostring(v)
  end))
end

-- Removes "@bot" (any case) and reports whether it was there.
local function strip_mention(text, bot)
  local pattern = "@" .. bot:lower():gsub("%p", "%%%0")
  local lower = text:lower()
  local s, e = lower:find(pattern)
  if not s then return text, false end
  local rest = (text:sub(1, s - 1) .. text:sub(e + 1)):gsub("%s+", " ")
  return text_util.trim(rest), true
end

-- The captures of rule `r` on `text`, or nil when it does not apply.
local function match_rule(r, text)
  if r.exact then
    if lower_trim(text) == lower_trim(r.exact) then return {} end
  elseif r.keyword then
    local padded = " " .. text:lower():gsub("[%p%s]+", " ") .. " "
    if padded:find(" " .. lower_trim(r.keyword) .. " ", 1, true) then return {} end
  elseif r.pattern then
    local caps = { text:match(r.pattern) }
    if #caps > 0 then return caps end
  end
  return nil
end

-- The FAQ entry whose keys all occur in the text.
local function faq_entry(entries, text)
  local lower = text:lower()
  for _, e in ipairs(entries) do
    local all = #e.keys > 0
    for _, k in ipairs(e.keys) do
      if not lower:find(k:lower(), 1, true) then all = false; break end
    end
    if all then return e end
  end
end

local faq = {}

-- A rule's identity for its cooldown and counters: its name, or what it matches. (Not its position:
-- a rule added above would take over another rule's cooldown.)
local function rule_id(r)
  if r.name then return r.name end
  local kind = r.exact and "exact" or r.keyword and "keyword" or "pattern"
  return kind .. ":" .. tostring(r.exact or r.keyword or r.pattern or ""):sub(1, 200)
end

return {
  name = "autoreply",
  priority = 0,
  config = {
    -- { exact|keyword|pattern = ..., reply = "..." or reply_key = "<key in locales/autoreply/*.toml>",
    --   cooldown = s, mention = bool, name = ... }
    rules = {
      { exact = "ping", reply_key = "pong" },
    },
    faq = {},                  -- { {keys = {"opening", "hours"}, answer = "..." or answer_key = "..."} }
    faq_module = false,        -- e.g. "faq": lib/faq.lua returns more entries
    cooldown = 30,             -- seconds between two answers of one rule in one conversation (0: none)
    only_when_mentioned = false,
    bot = false,               -- the bot's id for mentions ("@modbot"); defaults to ctx.bot
  },

  on_load = function(ctx)
    faq = {}
    for _, e in ipairs(ctx.config.faq) do faq[#faq + 1] = e end
    if ctx.config.faq_module then
      for _, e in ipairs(require(ctx.config.faq_module)) do faq[#faq + 1] = e end
    end
  end,

  on_receive = function(msg, ctx)
    local c = ctx.config
    local bot = c.bot or ctx.bot or "modbot"
    if msg.type ~= -1 or not msg.text or msg.from == bot then return end
    local text, mentioned = strip_mention(msg.text, bot)
    local vars = { from = msg.from, conversation = msg.cid, text = text }
    local conv = ctx.state.conv(msg.cid)

    -- `template` is a text, or { key = "..." } for a translated one
    local function answer(id, template, cooldown, needs_mention)
      if needs_mention and not mentioned then return false end
      if conv.get("cooldown:" .. id) then return true end
      if cooldown > 0 then conv.set("cooldown:" .. id, true, cooldown) end
      conv.incr("answered:" .. id)
      if type(template) == "table" then
        local tvars = {}
        for k, v in pairs(vars) do tvars[tostring(k)] = v end
        ctx.reply(ctx.t(template.key, tvars))
      else
        ctx.reply(render(template, vars))
      end
      return true
    end

    for _, r in ipairs(c.rules) do
      local caps = match_rule(r, text)
      if caps then
        for j, v in ipairs(caps) do vars[j] = v end
        local needs = r.mention
        if needs == nil then needs = c.only_when_mentioned end
        local reply = r.reply
        if reply == nil and r.reply_key then reply = { key = r.reply_key } end
        if reply ~= nil and answer(rule_id(r), reply, r.cooldown or c.cooldown, needs) then return end
      end
    end
    local e = faq_entry(faq, text)
    if e and e.answer then
      answer("faq:" .. e.answer:sub(1, 40), e.answer, c.cooldown, c.only_when_mentioned)
    elseif e and e.answer_key then
      answer("faq:" .. e.answer_key:sub(1, 40), { key = e.answer_key }, c.cooldown, c.only_when_mentioned)
    end
  end,
}
