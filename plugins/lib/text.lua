-- Text helpers whose cost grows linearly with the text. Patterns such as
-- "^%s*(.-)%s*$" retry their tail at every position and take quadratic time on
-- long runs of spaces, so one crafted message could stall the bot (and, while
-- it reviews messages, let others through by the failure policy).

local M = {}

local function is_space(b) return b == 32 or (b >= 9 and b <= 13) end

-- `s` without leading and trailing whitespace.
function M.trim(s)
  local i, j = 1, #s
  while i <= j and is_space(s:byte(i)) do i = i + 1 end
  while j >= i and is_space(s:byte(j)) do j = j - 1 end
  return s:sub(i, j)
end

-- `s` split into its body and its trailing characters from `set` (single
-- characters as keys): split_tail("hi?!", { ["?"] = true, ["!"] = true }) is
-- "hi", "?!".
function M.split_tail(s, set)
  local j = #s
  while j >= 1 and set[s:sub(j, j)] do j = j - 1 end
  return s:sub(1, j), s:sub(j + 1)
end

return M
