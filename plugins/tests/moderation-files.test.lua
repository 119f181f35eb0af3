-- Scenarios for the file rules of plugins/moderation.lua (run with `swift run hookbot test plugins/`).
-- `files` are stored on the simulated hub: a message whose file.id names one is filled from it, as the
-- server fills it, and the plugin sees the server's mime, size and sha256.

local CAT = "5f0d3b7a1e2c4d6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"
local BANNED = "aa11bb22cc33dd44ee55ff6600117722883399440055aa66bb77cc88dd99ee00"

local function photo(from, id, extra)
  local m = { type = "image", from = from, file = { id = id } }
  for k, v in pairs(extra or {}) do m[k] = v end
  return m
end

local files = {
  cat = { name = "cat.png", mime = "image/png", size = 48213, width = 640, height = 480, sha256 = CAT },
  meme = { name = "meme.jpg", mime = "image/jpeg", size = 90311, width = 800, height = 800, sha256 = BANNED },
  poster = { name = "poster.png", mime = "image/png", size = 12 * 1048576, width = 8000, height = 6000,
             sha256 = string.rep("ab", 32) },
  song = { name = "song.mp3", mime = "audio/mpeg", size = 3000000, duration = 187.5, sha256 = string.rep("cd", 32) },
  tool = { name = "holiday.png", mime = "application/x-executable", size = 20480, sha256 = string.rep("ef", 32) },
}

-- A group of `n` members posting photos at a human pace (one every 7 virtual seconds, each member
-- about every few minutes) for `rounds` rounds; members listed in `bad` post the banned meme instead.
local function photo_traffic(n, rounds, bad)
  local steps = {}
  local members = {}
  for i = 1, n do members[i] = "member" .. i end
  for r = 1, rounds do
    for i, uid in ipairs(members) do
      local id = "cat"
      if bad[uid] and r == bad[uid] then id = "meme" end
      local step = { message = photo(uid, id, { text = "round " .. r }) }
      if id == "meme" then
        step.expect = { verdict = "block", reason = "that file is not allowed here",
                        actions = { { kind = "warn", user = uid } } }
      else
        step.expect = { verdict = "allow", actions = {} }
      end
      steps[#steps + 1] = step
      steps[#steps + 1] = { advance = 7 }
    end
  end
  return steps
end

local traffic = photo_traffic(36, 2, { member7 = 1, member30 = 2 })
traffic[#traffic + 1] = { expect_state = { ["conv:c1:stats:file_banned"] = 2, ["conv:c1:stats:blocked"] = 2,
                                           ["conv:c1:strikes:member7"] = { 1700000042 }, ["conv:c1:strikes:member30"] = { 1700000455 },
                                           ["conv:c1:strikes:member8"] = NIL } }

-- A newcomer among established members: joins, posts a photo at once (refused), writes text (fine),
-- and posts again once the waiting time is over (delivered). Established members post all along.
local newcomer = {
  { join = { cid = "c1", members = { "newbie" }, by = "newbie" } },
  { expect_state = { ["conv:c1:joined:newbie"] = 1700000000 } },
  { message = photo("Tom", "cat"), expect = { verdict = "allow" } },
  { advance = 30 },
  { message = photo("newbie", "cat"),
    expect = { verdict = "block", reason = "new members cannot post files yet",
               actions = { { kind = "warn", user = "newbie", reason = "new members cannot post files yet" } } } },
  { message = { text = "hi all, glad to be here", from = "newbie" }, expect = { verdict = "allow" } },
}
for minute = 1, 9 do
  newcomer[#newcomer + 1] = { advance = 60 }
  newcomer[#newcomer + 1] = { message = photo(minute % 2 == 0 and "Jerry" or "Tom", "cat"), expect = { verdict = "allow" } }
end
newcomer[#newcomer + 1] = { advance = 31 }
newcomer[#newcomer + 1] = { message = photo("newbie", "cat"), expect = { verdict = "allow", actions = {} } }

return {
  plugins = { "moderation" },
  config = { flood = false, moderators = { "Mod" } },
  files = files,
  cases = {
    {
      name = "a stored photo passes, with the server's values in msg.file",
      steps = {
        { message = photo("Tom", "cat", { text = "my cat" }), expect = { verdict = "allow", text = "my cat", actions = {} } },
      },
    },
    {
      name = "a banned file (by SHA-256) is blocked with a strike and an audit entry",
      config = { banned_files = { BANNED:upper() } },
      steps = {
        { message = photo("Tom", "meme"),
          expect = { verdict = "block", reason = "that file is not allowed here", code = 4301,
                     actions = { { kind = "warn", user = "Tom", reason = "that file is not allowed here" } } } },
        { expect_state = { ["conv:c1:strikes:Tom"] = { 1700000000 }, ["conv:c1:stats:file_banned"] = 1,
                           audit = { { cid = "c1", user = "Tom", rule = "file_banned", action = "warn", strikes = 1,
                                       file = "meme.jpg", sha256 = BANNED } } } },
        -- The same picture under another name and a claimed size is the same file: the hash is the server's.
        { message = photo("Jerry", "meme", { file = { id = "meme", name = "innocent.jpg", size = 10 } }),
          expect = { verdict = "block", reason = "that file is not allowed here" } },
        { message = photo("Jerry", "cat"), expect = { verdict = "allow" } },
        { message = { text = "!mod stats", from = "Mod" },
          expect = { replies = { "moderation in c1: 2 blocked (flood 0, links 0, mentions 0, pattern 0, word 0, file_banned 2); "
                                 .. "2 warned, 0 muted, 0 kicked" } } },
      },
    },
    {
      name = "allowed kinds: only images and audio",
      config = { file_kinds = { "image", "audio" } },
      steps = {
        { message = photo("Tom", "cat"), expect = { verdict = "allow" } },
        { message = { type = "audio", from = "Tom", file = { id = "song" } }, expect = { verdict = "allow" } },
        { message = { type = "file", from = "Tom", file = { id = "cat" } },
          expect = { verdict = "block", reason = "that kind of file is not allowed here" } },
        { message = { type = "video", from = "Jerry", file = { url = "https://cdn.example.org/clip.mp4" } },
          expect = { verdict = "block", reason = "that kind of file is not allowed here" } },
      },
    },
    {
      name = "allowed types are the sniffed MIME types, not the name or the message kind",
      config = { file_types = { "image/*", "audio/mpeg" } },
      steps = {
        { message = photo("Tom", "cat"), expect = { verdict = "allow" } },
        { message = { type = "audio", from = "Tom", file = { id = "song" } }, expect = { verdict = "allow" } },
        -- An executable sent as an image named holiday.png: the server sniffed application/x-executable.
        { message = photo("Tom", "tool"), expect = { verdict = "block", reason = "that type of file is not allowed here" } },
        -- A URL-only file has no type the hub knows: refused when types are restricted.
        { message = photo("Jerry", nil, { file = { url = "https://cdn.example.org/a.png", name = "a.png" } }),
          expect = { verdict = "block", reason = "that type of file is not allowed here" } },
      },
    },
    {
      name = "largest size: the server's size counts, not the sender's claim",
      config = { max_file_mb = 10, ladder = { "warn" } },
      steps = {
        { message = photo("Tom", "cat"), expect = { verdict = "allow" } },
        { message = photo("Tom", "poster", { file = { id = "poster", size = 1000 } }),
          expect = { verdict = "block", reason = "that file is too large",
                     actions = { { kind = "warn", user = "Tom", reason = "that file is too large" } } } },
        -- A URL-only file is judged by the size its sender claims.
        { message = photo("Jerry", nil, { file = { url = "https://cdn.example.org/huge.png", size = 50 * 1048576 } }),
          expect = { verdict = "block", reason = "that file is too large" } },
        { message = photo("Jerry", nil, { file = { url = "https://cdn.example.org/small.png", size = 5000 } }),
          expect = { verdict = "allow" } },
      },
    },
    {
      name = "url_files = false refuses files not stored on the hub",
      config = { url_files = false },
      steps = {
        { message = photo("Tom", "cat"), expect = { verdict = "allow" } },
        { message = photo("Tom", nil, { file = { url = "https://cdn.example.org/a.png" } }),
          expect = { verdict = "block", reason = "only files uploaded here may be posted" } },
        -- An objId the hub does not know is no stored file either.
        { message = photo("Tom", "nosuchfile"), expect = { verdict = "block", reason = "only files uploaded here may be posted" } },
      },
    },
    {
      name = "no files from members who joined less than new_member_minutes ago",
      config = { new_member_minutes = 10 },
      steps = newcomer,
    },
    {
      name = "moderators and exempt clients are not held to file rules",
      config = { banned_files = { BANNED }, file_kinds = { "image" }, exempt = { "helperbot" } },
      steps = {
        { message = photo("Mod", "meme"), expect = { verdict = "allow" } },
        { message = { type = "file", from = "helperbot", file = { id = "tool" } }, expect = { verdict = "allow" } },
        { message = { type = "file", from = "Tom", file = { id = "tool" } },
          expect = { verdict = "block", reason = "that kind of file is not allowed here" } },
      },
    },
    {
      name = "a caption is still checked by the word rules",
      config = { words = { "scam" } },
      steps = {
        { message = photo("Tom", "cat", { text = "free scam inside" }),
          expect = { verdict = "block", reason = "please mind your language" } },
      },
    },
    {
      name = "36 members post photos over 8 virtual minutes; only the two banned memes are stopped",
      config = { banned_files = { BANNED }, max_file_mb = 10, file_types = { "image/*" }, new_member_minutes = 10,
                 flood = { messages = 5, seconds = 10 } },
      steps = traffic,
    },
  },
}
