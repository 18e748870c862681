-- Shared helpers: the keys a script builds itself, those of runs,
-- workflows and topics other than the ones its caller passed in KEYS.
-- They mirror keys.go, where doc.go's key layout is defined; the test
-- TestScriptKeys checks that both build the same keys.
-- KEYS: none read. ARGV: only P (ARGV[1], see header.lua).

local function rkey(id) return P .. 'r:' .. id end
local function ckey(id) return P .. 'c:' .. id end
local function akey(id) return P .. 'a:' .. id end
local function xkey(id) return P .. 'x:' .. id end
local function cxkey(n, id) return P .. 'cx:' .. n .. ':' .. id end
local function axkey(n, id) return P .. 'ax:' .. n .. ':' .. id end
local function chkey(id) return P .. 'ch:' .. id end
local function cat_wf() return P .. 'cat:w' end
local function cat_ev() return P .. 'cat:e' end
local function cat_q() return P .. 'cat:q' end
local function evkey(id, topic) return P .. 'e:' .. #id .. ':' .. id .. ':' .. topic end
local function evtopics(id) return P .. 'et:' .. id end
local function readyq(wf, ln) return P .. 'q:' .. (ln or '') .. wf end
local function leaseq(wf, ln) return P .. 'l:' .. (ln or '') .. wf end
local function levelset(qu, wf) return P .. 'lv:' .. qu .. ':' .. wf end
local function versionset(qu, wf) return P .. 'vs:' .. qu .. ':' .. wf end
local function queuedq(qu) return P .. 'qf:' .. qu end
local function partset(qu, pt) return P .. 'pr:' .. qu .. ':' .. pt end
local function queue_names() return P .. 'qn' end
local function startsq(qu) return P .. 'qs:' .. qu end
local function rated_queues() return P .. 'qr' end
local function waitset(topic) return P .. 'w:' .. topic end
local function idx_all() return P .. 'ia' end
local function idx_wf(wf) return P .. 'iw:' .. wf end
local function idx_st(st) return P .. 'is:' .. st end
local function idx_wf_st(st, wf) return P .. 'iws:' .. st .. ':' .. wf end
local function idx_q(qu) return P .. 'iq:' .. qu end
local function idx_q_st(st, qu) return P .. 'iqs:' .. st .. ':' .. qu end
local function fin_st(st) return P .. 'fx:' .. st end
local function fin_wf_st(st, wf) return P .. 'fx:' .. st .. ':' .. wf end
local function startkey(wf, key) return P .. 'sk:' .. wf .. ':' .. key end
local function tokkey(id) return P .. 'tk:' .. id end
local function schedkey(id) return P .. 's:' .. id end
local function sched_due() return P .. 'sc' end
local function sched_ids() return P .. 'si' end
local function upkey(id) return P .. 'up:' .. id end
local function urkey(id) return P .. 'ur:' .. id end
local function ulkey(id) return P .. 'ul:' .. id end
local function svkey(id, stream) return P .. 'sv:' .. id .. ':' .. stream end
local function smkey(id) return P .. 'sm:' .. id end
local function opkey(op) return P .. 'op:' .. op end
-- A shard of a Cluster store (a prefix ending in a shard's hash tag,
-- {<shard>.<n>}:) announces on the channels of the prefix before its tag,
-- which every shard shares.
local function channel_prefix() return (P:gsub('{%d+%.%d+}:$', '')) end
local function wake_channel() return channel_prefix() .. 'wake' end
local function ended_channel() return channel_prefix() .. 'ended' end
local function idx_created() return P .. 'ic' end
local function idx_wf_created(wf) return P .. 'icw:' .. wf end
local function attr_eq(name, t, v) return P .. 'ae:' .. name .. ':' .. t .. ':' .. v end
local function attr_num(name) return P .. 'an:' .. name end
local function attr_time(name) return P .. 'at:' .. name end
local function attr_str(name) return P .. 'as:' .. name end
