-- Offline translation between English and Chinese from a phrase table
-- (lib/phrasebook.lua), as a provider for the host's translate step, plus
-- `/translate <lang>` to auto-translate a conversation, `/translate off`, and
-- `/translate <lang> <text>` for one text. Results are cached per message id
-- and language in state. With `api_url` set (a LibreTranslate-compatible
-- service, reachable per [http.translate] in hookbot.toml), auto-translation
-- asks the service and answers when it replies; the phrase table is the
-- fallback when the service fails.

local book = require("phrasebook")
local text_util = require("text")

local LANGS = { en = true, zh = true }
local dict = { en = {}, zh = {} }   -- dict[from][phrase] = translation
local longest = { en = 1, zh = 1 }  -- longest phrase, in words (en) or characters (zh)

local PUNCT_TO_ZH = { ["?"] = "？", ["!"] = "！", ["."] = "。", [","] = "，" }
local PUNCT_TO_EN = { ["？"] = "?", ["！"] = "!", ["。"] = ".", ["，"] = "," }

local function chars(s)
  local out = {}
  for _, cp in utf8.codes(s) do out[#out + 1] = utf8.char(cp) end
  return out
end

local function detect(text)
  if utf8.len(text) then
    for _, cp in utf8.codes(text) do
      if cp >= 0x4E00 and cp <= 0x9FFF then return "zh" end
    end
  end
  return "en"
end

-- Splits trailing punctuation off: "Hello!" -> "hello", "!"
local function split_end(text, from)
  local body = text_util.trim(text)
  if from == "en" then
    local core, tail = text_util.split_tail(body, PUNCT_TO_ZH)
    return core:lower(), tail
  end
  local cs = chars(body)
  local tail = {}
  while #cs > 0 and PUNCT_TO_EN[cs[#cs]] do table.insert(tail, 1, table.remove(cs)) end
  return table.concat(cs), table.concat(tail)
end

-- Greedy longest match over units (words or characters); nil if any unit is unknown.
local function segments(units, from, sep)
  local out, i = {}, 1
  while i <= #units do
    local found
    for n = math.min(longest[from], #units - i + 1), 1, -1 do
      local phrase = table.concat(units, sep, i, i + n - 1)
      if dict[from][phrase] then found = n; out[#out + 1] = dict[from][phrase]; break end
    end
    if not found then return nil end
    i = i + found
  end
  return out
end

local function translate(text, from, to)
  if not LANGS[to] or not utf8.len(text) then return nil end
  from = from or detect(text)
  if from == to or not LANGS[from] then return nil end
  local core, tail = split_end(text, from)
  if core == "" then return nil end
  local parts
  if from == "en" then
    local words = {}
    for w in core:gsub("[,;]", " "):gmatch("[%w']+") do words[#words + 1] = w end
    parts = segments(words, "en", " ")
    if not parts then return nil end
    local punct = tail:gsub("[%?!%.,]", PUNCT_TO_ZH)
    return table.concat(parts) .. punct
  end
  local cs = {}
  for _, ch in ipairs(chars(core)) do if not PUNCT_TO_EN[ch] and ch ~= " " then cs[#cs + 1] = ch end end
  parts = segments(cs, "zh", "")
  if not parts then return nil end
  local s = table.concat(parts, " ")
  local punct = {}
  for _, ch in ipairs(chars(tail)) do punct[#punct + 1] = PUNCT_TO_EN[ch] end
  return s:sub(1, 1):upper() .. s:sub(2) .. table.concat(punct)
end

local function render(template, vars)
  return (template:gsub("{(%w+)}", function(k) return vars[k] and tostring(vars[k]) or "{" .. k .. "}" end))
end

-- A translation as posted: `format` from the config, or translated (in the conversation's language).
local function formatted(ctx, msg, to, text)
  local vars = { from = msg.from, to = to, text = text }
  if type(ctx.config.format) == "string" then return render(ctx.config.format, vars) end
  return ctx.t("format", vars, { conv = msg.cid })
end

-- Translation of message `id` into `lang`, cached in state.
local function cached(ctx, id, text, lang)
  local key = "cache:" .. id .. ":" .. lang
  local hit = ctx.state.get(key)
  if hit then return hit end
  local t = translate(text, nil, lang)
  if t and id ~= "" then ctx.state.set(key, t, ctx.config.cache_ttl) end
  return t
end

-- Auto-translation through a LibreTranslate-compatible API (POST {q, source, target, format, api_key} ->
-- {translatedText}); the reply comes when the service answers, from the phrase table if it fails.
local function translate_remotely(ctx, msg, text, lang)
  local key = "cache:" .. msg.id .. ":" .. lang
  local hit = ctx.state.get(key)
  local function answer(t)
    if t then ctx.reply(formatted(ctx, msg, lang, t)) end
  end
  if hit then return answer(hit) end
  local request = { q = text, source = "auto", target = lang, format = "text" }
  if ctx.config.api_key then request.api_key = ctx.config.api_key end
  local id, err = ctx.http.json("POST", ctx.config.api_url, request, function(res, ctx)
    local t = res.ok and res.json and type(res.json.translatedText) == "string" and res.json.translatedText or nil
    if not t then
      ctx.log("warning", "translation service failed (" .. (res.error or ("HTTP " .. tostring(res.status))) .. "); using the phrase table")
      t = translate(text, nil, lang)
    end
    if t and msg.id ~= "" then ctx.state.set(key, t, ctx.config.cache_ttl) end
    answer(t)
  end)
  if not id then
    ctx.log("warning", "translation service not called: " .. err)
    answer(cached(ctx, msg.id, text, lang))
  end
end

-- /translate commands; returns the reply text (in the language of the member who asked).
local function command(ctx, cid, args)
  local conv = ctx.state.conv(cid)
  local lang, rest = args:match("^(%S*)(.*)$")
  local text = text_util.trim(rest)
  if lang == "" then
    local current = conv.get("auto")
    if current == nil then current = ctx.config.auto[cid] end
    return current and ctx.t("auto.on", { lang = current }) or ctx.t("auto.off")
  elseif lang == "off" then
    conv.set("auto", false)
    return ctx.t("auto.off")
  elseif not LANGS[lang] then
    return ctx.t("unknown_language", { lang = lang, languages = "en, zh" })
  elseif text ~= "" then
    return translate(text, nil, lang) or ctx.t("no_translation", { text = text })
  end
  conv.set("auto", lang)
  return ctx.t("auto.on", { lang = lang })
end

return {
  name = "translate",
  priority = 10,
  config = {
    auto = {},                   -- conversation id -> language, until changed by /translate
    cache_ttl = 86400,
    format = false,              -- false: translated, "{from} ({to}): {text}" in English; a string: that, always
    reply_host_translations = true, -- answer messages the host translated (translate_to in hookbot.toml)
    phrases = {},                -- more { english, chinese } pairs
    api_url = false,             -- e.g. "https://libretranslate.example.org/translate" (also list its host in [http.translate])
    api_key = false,
  },

  on_load = function(ctx)
    dict, longest = { en = {}, zh = {} }, { en = 1, zh = 1 }
    local function add(en, zh)
      dict.en[en:lower()] = zh
      dict.zh[zh] = en
      local _, spaces = en:gsub(" ", "")
      longest.en = math.max(longest.en, spaces + 1)
      longest.zh = math.max(longest.zh, utf8.len(zh))
    end
    for _, p in ipairs(book) do add(p[1], p[2]) end
    for _, p in ipairs(ctx.config.phrases) do add(p[1], p[2]) end
  end,

  translate = function(text, from, to, ctx)
    return translate(text, from, to)
  end,

  on_receive = function(msg, ctx)
    local text = msg.text
    if msg.type ~= -1 or not text then return end
    if text == "/translate" or text:sub(1, 11) == "/translate " then
      return ctx.reply(command(ctx, msg.cid, text:sub(12)))
    end
    if text:sub(1, 1) == "/" then return end
    local host = msg.attrs.translation
    if host and ctx.config.reply_host_translations then
      return ctx.reply(formatted(ctx, msg, host.to, host.text))
    end
    local lang = ctx.state.conv(msg.cid).get("auto")
    if lang == nil then lang = ctx.config.auto[msg.cid] end
    if not lang or detect(text) == lang then return end
    if ctx.config.api_url then return translate_remotely(ctx, msg, text, lang) end
    local t = cached(ctx, msg.id, text, lang)
    if t then ctx.reply(formatted(ctx, msg, lang, t)) end
  end,

  on_cmd = function(cmd, ctx)
    if cmd.action ~= "translate" then return end
    local args = (cmd.ext.lang or "") .. " " .. (cmd.ext.text or "")
    ctx.send(cmd.cid, command(ctx, cmd.cid, args))
  end,
}
