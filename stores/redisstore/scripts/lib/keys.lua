-- Shared helpers: the keys a script builds itself, those of runs,
-- workflows and topics other than the ones its caller passed in KEYS.
-- They mirror keys.go, where doc.go's key layout is defined; the test
-- TestScriptKeys checks that both build the same keys.
-- KEYS: none read. ARGV: only P (ARGV[1], see header.lua).

local function rkey(id) return P .. 'r:' .. id end
local function ckey(id) return P .. 'c:' .. id end
local function xkey(id) return P .. 'x:' .. id end
local function cxkey(n, id) return P .. 'cx:' .. n .. ':' .. id end
local function axkey(n, id) return P .. 'ax:' .. n .. ':' .. id end
local function chkey(id) return P .. 'ch:' .. id end
local function cat_wf() return P .. 'cat:w' end
local function cat_ev() return P .. 'cat:e' end
local function evkey(id, topic) return P .. 'e:' .. #id .. ':' .. id .. ':' .. topic end
local function readyq(wf) return P .. 'q:' .. wf end
local function leaseq(wf) return P .. 'l:' .. wf end
local function waitset(topic) return P .. 'w:' .. topic end
local function idx_all() return P .. 'ia' end
local function idx_wf(wf) return P .. 'iw:' .. wf end
local function idx_st(st) return P .. 'is:' .. st end
local function idx_wf_st(st, wf) return P .. 'iws:' .. st .. ':' .. wf end
local function opkey(op) return P .. 'op:' .. op end
local function wake_channel() return P .. 'wake' end
local function ended_channel() return P .. 'ended' end
