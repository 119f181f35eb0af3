-- Scenarios for plugins/moderation.lua (run with `swift run hookbot test plugins/`).

local function msg(text, from, cid) return { message = { text = text, from = from or "Tom", cid = cid or "c1" } } end

-- `n` allowed messages from `from`.
local function quiet(n, from)
  local steps = {}
  for i = 1, n do
    local s = msg("message " .. i, from)
    s.expect = { verdict = "allow", replies = {}, actions = {} }
    steps[#steps + 1] = s
  end
  return steps
end

local function with(steps, ...)
  for _, more in ipairs({ ... }) do
    for _, s in ipairs(more) do steps[#steps + 1] = s end
  end
  return steps
end

return {
  plugins = { "moderation" },
  config = {
    words = { "scam", "free money", "骗子" },
    patterns = { "buy%s+now" },
    moderators = { "Mod" },
    flood = false,
  },
  cases = {
    {
      name = "clean messages pass untouched",
      steps = {
        { message = "hello everyone", expect = { verdict = "allow", text = "hello everyone", replies = {}, actions = {} } },
        { message = "scampi for dinner?", expect = { verdict = "allow" } },
        { message = "this cam is broken", expect = { verdict = "allow" } },
      },
    },
    {
      name = "a banned word is blocked with a warning and an audit entry",
      steps = {
        { message = "this is a scam",
          expect = { verdict = "block", reason = "please mind your language", code = 4301, silent = false,
                     actions = { { kind = "warn", user = "Tom", reason = "please mind your language" } },
                     replies = { { cid = "c1", text = "@Tom please mind your language", mentions = { "Tom" } } } } },
        { expect_state = { ["conv:c1:strikes:Tom"] = { 1700000000 }, ["conv:c1:stats:word"] = 1,
                           audit = { { cid = "c1", user = "Tom", rule = "word", action = "warn", strikes = 1 } } } },
      },
    },
    {
      name = "normalisation catches case, width, spacing, punctuation and repeats",
      config = { ladder = { "warn" } },
      steps = {
        { message = "SCAM", expect = { verdict = "block", reason = "please mind your language" } },
        { message = "ｓｃａｍ alert", expect = { verdict = "block", reason = "please mind your language" } },
        { message = "what a s c a m", expect = { verdict = "block", reason = "please mind your language" } },
        { message = "s.c.a.m!", expect = { verdict = "block", reason = "please mind your language" } },
        { message = "scaaaaammm", expect = { verdict = "block", reason = "please mind your language" } },
        { message = "get FREE   m-o-n-e-y", expect = { verdict = "block", reason = "please mind your language" } },
        { message = "你是骗子吗", expect = { verdict = "block", reason = "please mind your language" } },
      },
    },
    {
      name = "substring mode also matches inside longer words",
      config = { substring = true },
      steps = {
        { message = "scampi for dinner?", expect = { verdict = "block", reason = "please mind your language" } },
      },
    },
    {
      name = "patterns are Lua patterns on the lowercased text",
      steps = {
        { message = "BUY   NOW while stocks last", expect = { verdict = "block", reason = "that message is not allowed here",
          replies = { "@Tom that message is not allowed here" } } },
        { message = "I will buy it now", expect = { verdict = "allow" } },
      },
    },
    {
      name = "an invalid pattern is skipped with a warning at load",
      config = { patterns = { "[unclosed", "spam+" } },
      expect_load = { logs = { "ignoring invalid pattern [unclosed" } },
      steps = {
        { message = "spammm", expect = { verdict = "block", reason = "that message is not allowed here" } },
        { message = "hello", expect = { verdict = "allow" } },
      },
    },
    {
      name = "link limit",
      config = { max_links = 2 },
      steps = {
        { message = "see https://a.example and http://b.example", expect = { verdict = "allow" } },
        { message = "https://a.example https://b.example www.c.example", expect = { verdict = "block", reason = "too many links",
          replies = { "@Tom too many links" } } },
      },
    },
    {
      name = "each link counts once: https://www.x is one link, a bare www.x another",
      steps = {
        { message = "https://www.a.example/x https://www.b.example www.c.example", expect = { verdict = "allow" } },
        { message = "HTTP://WWW.A.EXAMPLE and awww. so cute https://b.example/www.c", expect = { verdict = "allow" } },
        { message = "https://www.a.example https://www.b.example www.c.example www.d.example",
          expect = { verdict = "block", reason = "too many links" } },
      },
    },
    {
      name = "mention limit",
      config = { max_mentions = 2 },
      steps = {
        { message = "@Jerry @Spike hi", expect = { verdict = "allow" } },
        { message = "@Jerry @Spike @Tyke hi", expect = { verdict = "block", reason = "too many mentions" } },
        { message = "mail me at tom@example.com tom@example.org x@y.z", expect = { verdict = "allow" } },
      },
    },
    {
      name = "disabled limits do not apply",
      config = { max_links = false, max_mentions = false },
      steps = {
        { message = "@a @b @c @d @e @f @g https://1 https://2 https://3 https://4", expect = { verdict = "allow" } },
      },
    },
    {
      name = "flood control counts per user and conversation and resets after the window",
      config = { flood = { messages = 3, seconds = 10 } },
      steps = with(quiet(3), {
        { message = "fourth", expect = { verdict = "block", reason = "slow down, you are sending messages too fast",
          replies = { "@Tom slow down, you are sending messages too fast" } } },
        { message = { text = "Jerry is fine", from = "Jerry" }, expect = { verdict = "allow" } },
        { message = { text = "other room", cid = "c2" }, expect = { verdict = "allow" } },
        { advance = 11 },
        { message = "after the window", expect = { verdict = "allow" } },
      }),
    },
    {
      name = "the flood window is fixed: a member writing every 3 s is never flooded",
      config = { flood = { messages = 5, seconds = 10 } },
      steps = (function()
        -- 4 messages in every 10 s, for a minute: a window opened by the first message resets 10 s later.
        local steps = {}
        for i = 1, 20 do
          steps[#steps + 1] = { message = "line " .. i, expect = { verdict = "allow", actions = {} } }
          steps[#steps + 1] = { advance = 3 }
        end
        return steps
      end)(),
    },
    {
      name = "a burst of 6 within one window is flooding, even after a quiet minute",
      config = { flood = { messages = 5, seconds = 10 } },
      steps = with(quiet(5), {
        { message = "sixth", expect = { verdict = "block", reason = "slow down, you are sending messages too fast" } },
        { advance = 60 },
      }, quiet(5), {
        { message = "sixth again", expect = { verdict = "block", reason = "slow down, you are sending messages too fast",
          actions = { { kind = "mute", seconds = 600 }, { kind = "warn" } } } },
      }),
    },
    {
      name = "the ladder warns, then mutes, then kicks (and the kick bans)",
      steps = {
        { message = "scam 1", expect = { verdict = "block", actions = { { kind = "warn" } } } },
        { message = "scam 2", expect = { verdict = "block",
          actions = { { kind = "mute", user = "Tom", seconds = 600 }, { kind = "warn" } },
          replies = { "@Tom please mind your language; muted for 10 min" } } },
        { message = "anything", expect = { verdict = "muted", replies = {} } },
        { advance = 601 },
        { message = "scam 3", expect = { verdict = "block",
          actions = { { kind = "kick", cid = "c1", user = "Tom", reason = "please mind your language" } } } },
        { expect_state = { ["conv:c1:banned:Tom"] = true, ["conv:c1:stats:kick"] = 1, ["conv:c1:stats:mute"] = 1,
                           ["conv:c1:stats:warn"] = 1, ["conv:c1:stats:blocked"] = 3 } },
        { join = { cid = "c1", members = { "Tom" }, by = "Jerry" },
          expect = { actions = { { kind = "kick", user = "Tom", reason = "banned" } } } },
      },
    },
    {
      name = "a configurable ladder and mute length",
      config = { ladder = { "warn", "warn", "mute" }, mute_minutes = 1 },
      steps = {
        { message = "scam", expect = { actions = { { kind = "warn" } } } },
        { message = "scam", expect = { actions = { { kind = "warn" } } } },
        { message = "scam", expect = { actions = { { kind = "mute", seconds = 60 }, { kind = "warn" } } } },
        { message = "scam", expect = { verdict = "muted" } },
        { advance = 61 },
        { message = "scam", expect = { actions = { { kind = "mute", seconds = 60 }, { kind = "warn" } } } },
      },
    },
    {
      name = "strikes expire after strike_ttl",
      config = { strike_ttl = 3600 },
      steps = {
        { message = "scam", expect = { actions = { { kind = "warn" } } } },
        { advance = 3601 },
        { message = "scam", expect = { actions = { { kind = "warn" } } } },
        { expect_state = { ["conv:c1:strikes:Tom"] = { 1700003601 } } },
      },
    },
    {
      name = "each strike decays strike_ttl after it was given, not after the last one",
      config = { strike_ttl = 3600 },
      steps = {
        { message = "scam", expect = { actions = { { kind = "warn" } } } },
        { advance = 2500 },
        { message = "scam", expect = { actions = { { kind = "mute" }, { kind = "warn" } } } },
        { advance = 2500 },
        -- The first strike (t = 0) has decayed: this is the second again, not the third.
        { message = "scam", expect = { actions = { { kind = "mute", seconds = 600 }, { kind = "warn" } } } },
        { expect_state = { ["conv:c1:strikes:Tom"] = { 1700002500, 1700005000 } } },
        { advance = 601 },
        { message = "scam", expect = { actions = { { kind = "kick", user = "Tom" } } } },
      },
    },
    {
      name = "the plugin enforces its own mutes when the bot is not the interceptor",
      steps = {
        { set_state = { ["conv:c1:muted:Tom"] = 1 } },
        { message = "hello", expect = { verdict = "block", reason = "you are muted", silent = true, replies = {} } },
      },
    },
    {
      name = "silent mode and a custom code",
      config = { silent = true, code = 4999 },
      steps = {
        { message = "scam", expect = { verdict = "block", silent = true, code = 4999 } },
      },
    },
    {
      name = "moderators and exempt users are not moderated",
      config = { exempt = { "modbot", "Spike" } },
      steps = {
        { message = { text = "scam scam", from = "Mod" }, expect = { verdict = "allow" } },
        { message = { text = "scam", from = "Spike" }, expect = { verdict = "allow" } },
      },
    },
    {
      name = "!mod stats and !mod strikes from a moderator",
      steps = {
        { message = "scam" },
        { message = "https://1 https://2 https://3 https://4" },
        { message = { text = "!mod stats", from = "Mod" }, expect = { replies = {
          "moderation in c1: 2 blocked (flood 0, links 1, mentions 0, pattern 0, word 1); 1 warned, 1 muted, 0 kicked" } } },
        { message = { text = "!mod strikes Tom", from = "Mod" }, expect = { replies = { "Tom has 2 strike(s)" } } },
        { message = { text = "!mod audit 1", from = "Mod" }, expect = { replies = { "c1 Tom mute (links)" } } },
        { message = { text = "!mod", from = "Mod" }, expect = { replies = { { match = "^usage: !mod pardon <user> | history" } } } },
      },
    },
    {
      name = "!mod from someone who is not a moderator is refused",
      steps = {
        { message = "!mod stats", expect = { verdict = "allow", replies = { "!mod is only for moderator" } } },
        { cmd = { action = "mod", from = "Tom", ext = { command = "unban", user = "Tom" } },
          expect = { replies = { "!mod is only for moderator" }, actions = {} } },
      },
    },
    {
      name = "the mod cmd message unban clears strikes, unmutes and re-adds a kicked user",
      steps = {
        { message = "scam" }, { message = "scam" }, { advance = 601 }, { message = "scam" },
        { cmd = { action = "mod", from = "Mod", cid = "c1", ext = { command = "unban", user = "Tom" } },
          expect = {
            actions = { { kind = "mute", user = "Tom", seconds = 0 }, { kind = "add", user = "Tom" } },
            replies = { "Tom is unbanned; strikes cleared" },
          } },
        { expect_state = { ["conv:c1:stats:kick"] = 1 }, expect = { absent = { "conv:c1:strikes:Tom", "conv:c1:banned:Tom" } } },
        { message = "hello again", expect = { verdict = "allow" } },
        { message = "scam", expect = { actions = { { kind = "warn" } } } },
      },
    },
    {
      name = "!mod unban, and usage errors",
      steps = {
        { message = "scam" }, { message = "scam" },
        { message = "hi", expect = { verdict = "muted" } },
        { message = { text = "!mod unban Tom", from = "Mod" },
          expect = { replies = { "Tom is unbanned; strikes cleared" }, actions = { { kind = "mute", seconds = 0 } } } },
        { message = "hi", expect = { verdict = "allow" } },
        { message = { text = "!mod unban", from = "Mod" }, expect = { replies = { "usage: !mod unban <user> [conversation]" } } },
        { message = { text = "!mod audit", from = "Mod" }, expect = { replies = { { match = "unban$" } } } },
      },
    },
    {
      name = "the audit log keeps the last audit_size entries",
      config = { audit_size = 2, ladder = { "warn" } },
      steps = {
        { message = "scam" }, { message = "buy now" }, { message = "scam" },
        { expect_state = { audit = { { rule = "pattern" }, { rule = "word" } } } },
      },
    },
    {
      name = "the bot's own messages are not moderated",
      steps = {
        { message = { text = "scam", from = "modbot" }, expect = { verdict = "ignored", actions = {} } },
      },
    },
    {
      name = "client mode: mutes are not enforced by the host, the plugin still blocks",
      mode = "client",
      steps = {
        { message = "scam" }, { message = "scam" },
        { message = "hello", expect = { verdict = "block", reason = "you are muted", silent = true } },
      },
    },
  },
}
