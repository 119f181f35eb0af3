-- !setup: a multi-step command. It asks the member three questions in turn (ctx.ask waits for the
-- member's next message in this conversation; other members and events flow meanwhile), checks each
-- answer and asks again when it does not fit, shows a summary and saves it on "yes".
-- `cancel` / `取消` stops it; so does a minute without an answer.

local LANGUAGES = { en = "English", zh = "中文" }

-- Asks until `check` accepts the answer (it returns the value, or nil and what is wrong).
-- Returns the value, or nil and why the dialog ended ("timeout", "cancelled", "replaced", "ended").
local function ask_until(ctx, prompt, check)
  while true do
    local answer, why = ctx.ask(prompt, { timeout = 60 })
    if not answer then return nil, why end
    local value, problem = check(answer.text or "")
    if value ~= nil then return value end
    prompt = problem .. " " .. prompt
  end
end

local function name_ok(text)
  local name = text:match("^%s*(.-)%s*$")
  local n = utf8.len(name)
  if not n or n < 1 or n > 32 then return nil, "A name has 1 to 32 characters." end
  return name
end

local function city_ok(text)
  local city = text:match("^%s*(.-)%s*$")
  if city == "" or #city > 64 then return nil, "Which city, in a few words?" end
  return city
end

local function language_ok(text)
  local code = text:lower():match("^%s*(%a%a)%s*$")
  if code and LANGUAGES[code] then return code end
  return nil, "Please answer en or zh."
end

local function yes_no(text)
  local t = text:lower():match("^%s*(.-)%s*$")
  if t == "yes" or t == "y" or t == "是" or t == "好" then return true end
  if t == "no" or t == "n" or t == "否" or t == "不" then return false end
  return nil, "yes or no?"
end

local STOPPED = {
  timeout = "Setup stopped: no answer for a minute. Type !setup to start again.",
  cancelled = "Setup cancelled.",
  replaced = "Setup restarted.",
  ended = "Setup stopped: the bot is updating. Type !setup to start again.",
}

local function setup(args, msg, ctx)
  local name, why = ask_until(ctx, "What should I call you?", name_ok)
  if not name then return ctx.reply(STOPPED[why]) end
  local city
  city, why = ask_until(ctx, "Hi " .. name .. "! Which city are you in?", city_ok)
  if not city then return ctx.reply(STOPPED[why]) end
  local lang
  lang, why = ask_until(ctx, "Language: en or zh?", language_ok)
  if not lang then return ctx.reply(STOPPED[why]) end
  local summary = name .. ", " .. city .. ", " .. LANGUAGES[lang]
  local ok
  ok, why = ask_until(ctx, "Save " .. summary .. "? (yes/no)", yes_no)
  if ok == nil then return ctx.reply(STOPPED[why]) end
  if not ok then return ctx.reply("Not saved.") end
  ctx.state.user(msg.from).set("profile", { name = name, city = city, lang = lang })
  ctx.reply("Saved: " .. summary .. ".")
end

return {
  name = "setup",
  on_load = function(ctx)
    ctx.commands.add{ name = "setup", description = "set up your profile, one question at a time", run = setup }
    ctx.commands.add{ name = "profile", description = "show your profile",
      run = function(args, msg, ctx)
        local p = ctx.state.user(msg.from).get("profile")
        if not p then return ctx.reply("No profile yet: type !setup.") end
        ctx.reply(p.name .. ", " .. p.city .. ", " .. LANGUAGES[p.lang])
      end }
  end,
}
