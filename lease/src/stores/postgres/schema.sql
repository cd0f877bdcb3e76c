-- The PostgreSQL store's tables and functions, in the schema the client names (`@schema@` is its
-- quoted name, `@channel@` the notification channel of its releases, as a string literal). Made
-- by the first client that finds them missing, in one transaction; a role that may not create
-- them is told which right it lacks, and an administrator runs this file instead (the guide shows
-- it). Every function takes the name's row lock first: the calls on one name run one at a time,
-- and each sees what the one before it committed. Expiries are set and judged by the database's
-- clock (clock_timestamp()), never the client's; an expired hold is taken over lazily, so no
-- reaper runs anywhere. Commits are synchronous whatever the server's setting (`enter` and
-- `renew` say so): a hold, a renewal or a token the server acknowledged survives its crash. Two
-- kinds of call write nothing a crash may take back without harm and commit without waiting for
-- the WAL's flush: a release that frees a name other than an election's (lost, its hold comes
-- back and lapses with its lease, which nobody renews; any later synchronous commit flushes it
-- first), and an acquisition that
-- finds the name busy and reserves nothing (a waiter's mark or the flag that makes the next
-- release announce: lost, waiters look again by themselves).
CREATE SCHEMA IF NOT EXISTS @schema@;

-- One row per name ever used: its fencing counter (the last token handed out, which only rises),
-- the family of the primitive holding it now ('lock' for a lock, a fair lock or an election,
-- 'semaphore', 'rw'; none while nothing holds it), a semaphore's stored number of permits, and
-- whether a waiter found it held since its last release was announced.
CREATE TABLE IF NOT EXISTS @schema@.names (
    key text PRIMARY KEY,
    fence bigint NOT NULL DEFAULT 0 CHECK (fence >= 0),
    family text,
    permits integer,
    contended boolean NOT NULL DEFAULT false
);

-- One row per hold: its owner, which side it takes ('lock', 'read', 'write', 'permits') and how
-- many permits, its token, when its lease lapses (the database's clock), the acquisitions of it
-- not yet released (their number is the hold count), and what an election's leader proclaimed.
CREATE TABLE IF NOT EXISTS @schema@.holds (
    key text NOT NULL,
    hold text NOT NULL,
    owner text NOT NULL,
    side text NOT NULL,
    take integer NOT NULL,
    token bigint NOT NULL,
    expires timestamptz NOT NULL,
    acquisitions text[] NOT NULL,
    proclaimed text,
    PRIMARY KEY (key, hold)
);

-- Waiters that leave a mark: a fair lock's line ('fair': by when each first asked) and a writer
-- that waits ('writer': new readers let it go first). A mark lapses unless its waiter asks again.
CREATE TABLE IF NOT EXISTS @schema@.marks (
    key text NOT NULL,
    what text NOT NULL,
    owner text NOT NULL,
    arrived timestamptz NOT NULL,
    lapses timestamptz NOT NULL,
    PRIMARY KEY (key, what, owner)
);

-- Acquisitions that ended: 'released', the last of a hold's (for 60 s, so that a release sent
-- again is told it was applied), and 'undone', an attempt whose answer was lost (for a day, so
-- that the attempt, should it run after its undoing, takes nothing).
CREATE TABLE IF NOT EXISTS @schema@.ended (
    key text NOT NULL,
    id text NOT NULL,
    how text NOT NULL,
    at timestamptz NOT NULL,
    PRIMARY KEY (key, id)
);
-- The sweep of a name's old records reads only those old enough to go.
CREATE INDEX IF NOT EXISTS ended_at ON @schema@.ended (key, at);

-- The functions whose arguments or results changed since the store's first version.
DROP FUNCTION IF EXISTS @schema@.acquire(text, text, text, text, text, bigint, boolean, integer,
    integer, integer);
DROP FUNCTION IF EXISTS @schema@.release(text, text, text, text, boolean);

-- The name's row, locked for the rest of the transaction (made if it is new), with what has
-- lapsed swept away: expired holds, lapsed marks, old records of ended acquisitions.
CREATE OR REPLACE FUNCTION @schema@.enter(p_key text) RETURNS @schema@.names
LANGUAGE plpgsql AS $$
DECLARE
    n @schema@.names;
    v_now timestamptz;
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    SELECT * INTO n FROM @schema@.names WHERE key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO @schema@.names (key) VALUES (p_key) ON CONFLICT DO NOTHING;
        SELECT * INTO n FROM @schema@.names WHERE key = p_key FOR UPDATE;
    END IF;
    v_now := clock_timestamp();
    DELETE FROM @schema@.holds WHERE key = p_key AND expires <= v_now;
    DELETE FROM @schema@.marks WHERE key = p_key AND lapses <= v_now;
    DELETE FROM @schema@.ended WHERE key = p_key AND at < v_now - interval '60 s'
        AND (how = 'released' OR at < v_now - interval '1 day');
    IF n.family IS NOT NULL AND NOT EXISTS (SELECT 1 FROM @schema@.holds WHERE key = p_key) THEN
        UPDATE @schema@.names SET family = NULL WHERE key = p_key;
        n.family := NULL;
    END IF;
    RETURN n;
END $$;

-- Announces that the name's holds changed: to its waiters if one found it held (`always` for an
-- election, whose observers follow every change).
CREATE OR REPLACE FUNCTION @schema@.announce(p_key text, p_contended boolean, p_always boolean)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_contended OR p_always THEN
        PERFORM pg_notify(@channel@, p_key);
        IF p_contended THEN
            UPDATE @schema@.names SET contended = false WHERE key = p_key;
        END IF;
    END IF;
END $$;

-- One attempt of `p_owner` to take the primitive `p_kind` ('lock', 'fair', 'leader',
-- 'semaphore', 'read', 'write') named `p_key` as the acquisition `p_id` (also the new hold's id),
-- or to re-enter its hold `p_reenter`, with a lease of `p_lease_ms`. A semaphore's acquisition
-- declares `p_permits` and takes `p_take`; a waiting fair or write acquisition (`p_waits`) keeps
-- a mark for `p_mark_ms`. A lock's acquisition may reserve `p_reserve` fencing tokens for its
-- client's threads to hand the hold on without the store: past a new hold's own token, or, with
-- `p_reserve_for`, for that hold of its client if the attempt finds it holding the lock (no
-- later hold is handed a reserved token: the counter moves past them). Returns whether it holds,
-- the hold count, the token, when busy how long until the hold in its way lapses (ms), the
-- tokens reserved (`reserved_first` to `reserved_last`; `reserved_first` is set only for a
-- busy attempt, a new hold's being the token after its own), and whether a waiter found the
-- name held since it was last freed (`rivals`). Raises LS001 (another primitive's name, DETAIL
-- its family), LS002 (a semaphore's holders declared other permits, DETAIL them), LS003 (the
-- counter has no token left).
CREATE OR REPLACE FUNCTION @schema@.acquire(
    p_key text, p_kind text, p_owner text, p_id text, p_reenter text, p_lease_ms bigint,
    p_waits boolean, p_permits integer, p_take integer, p_mark_ms integer,
    p_reserve_for text, p_reserve integer,
    OUT acquired boolean, OUT holds integer, OUT token bigint, OUT ttl_ms bigint,
    OUT reserved_first bigint, OUT reserved_last bigint, OUT rivals boolean)
LANGUAGE plpgsql AS $$
DECLARE
    top bigint;
    n @schema@.names;
    h @schema@.holds;
    v_now timestamptz;
    v_family text := CASE p_kind WHEN 'semaphore' THEN 'semaphore' WHEN 'read' THEN 'rw'
        WHEN 'write' THEN 'rw' ELSE 'lock' END;
    free boolean;
    lapse timestamptz;
    head text;
BEGIN
    n := @schema@.enter(p_key);
    v_now := clock_timestamp();
    acquired := false;
    holds := 0;
    IF EXISTS (SELECT 1 FROM @schema@.ended WHERE key = p_key AND id = p_id) THEN
        -- Undone before it ran: it takes nothing.
        ttl_ms := 1;
        RETURN;
    END IF;
    -- Sent again after its answer was lost (on a connection the server had closed): what it
    -- took, it holds still.
    SELECT * INTO h FROM @schema@.holds
        WHERE key = p_key AND owner = p_owner AND p_id = ANY (acquisitions);
    IF FOUND THEN
        acquired := true;
        holds := cardinality(h.acquisitions);
        token := h.token;
        RETURN;
    END IF;
    IF n.family IS NOT NULL AND n.family <> v_family THEN
        RAISE EXCEPTION 'the name is another primitive''s' USING ERRCODE = 'LS001',
            DETAIL = n.family;
    END IF;
    IF p_reenter <> '' THEN
        SELECT * INTO h FROM @schema@.holds
            WHERE key = p_key AND hold = p_reenter AND owner = p_owner;
        IF FOUND THEN
            UPDATE @schema@.holds SET acquisitions = acquisitions || p_id,
                expires = greatest(expires, v_now + p_lease_ms * interval '1 ms')
                WHERE key = p_key AND hold = p_reenter;
            acquired := true;
            holds := cardinality(h.acquisitions) + 1;
            token := h.token;
            RETURN;
        END IF;
    END IF;
    IF p_kind = 'semaphore' THEN
        IF n.family IS NOT NULL AND n.permits IS DISTINCT FROM p_permits THEN
            RAISE EXCEPTION 'the semaphore''s holders declared other permits' USING
                ERRCODE = 'LS002', DETAIL = n.permits::text;
        END IF;
        free := (SELECT coalesce(sum(take), 0) FROM @schema@.holds WHERE key = p_key) + p_take
            <= p_permits;
    ELSIF p_kind = 'read' THEN
        free := NOT EXISTS (SELECT 1 FROM @schema@.holds
                WHERE key = p_key AND side = 'write' AND owner <> p_owner)
            AND NOT EXISTS (SELECT 1 FROM @schema@.marks
                WHERE key = p_key AND what = 'writer' AND owner <> p_owner);
    ELSE
        free := NOT EXISTS (SELECT 1 FROM @schema@.holds WHERE key = p_key);
    END IF;
    IF free AND p_kind = 'fair' THEN
        SELECT owner, lapses INTO head, lapse FROM @schema@.marks
            WHERE key = p_key AND what = 'fair' ORDER BY arrived, owner LIMIT 1;
        IF head IS NOT NULL AND head <> p_owner THEN
            free := false;
        END IF;
    END IF;
    IF free THEN
        IF n.fence >= 9223372036854775807 THEN
            RAISE EXCEPTION 'the fencing counter has reached the largest token' USING
                ERRCODE = 'LS003';
        END IF;
        token := n.fence + 1;
        top := token;
        IF p_kind = 'lock' AND p_reserve > 0 AND p_reserve_for = '' THEN
            top := token + least(p_reserve::bigint, 9223372036854775807 - token);
            IF top > token THEN
                reserved_last := top;
                rivals := n.contended;
            END IF;
        END IF;
        UPDATE @schema@.names SET fence = top, family = v_family,
            permits = CASE WHEN p_kind = 'semaphore' THEN p_permits ELSE permits END
            WHERE key = p_key;
        INSERT INTO @schema@.holds VALUES (p_key, p_id, p_owner,
            CASE p_kind WHEN 'semaphore' THEN 'permits' WHEN 'read' THEN 'read'
                WHEN 'write' THEN 'write' ELSE 'lock' END,
            p_take, token, v_now + p_lease_ms * interval '1 ms', ARRAY[p_id], NULL);
        DELETE FROM @schema@.marks WHERE key = p_key AND owner = p_owner;
        acquired := true;
        holds := 1;
        RETURN;
    END IF;
    IF p_kind = 'lock' AND p_reserve > 0 AND p_reserve_for <> ''
            AND n.fence < 9223372036854775807
            AND EXISTS (SELECT 1 FROM @schema@.holds WHERE key = p_key AND hold = p_reserve_for) THEN
        -- Its own client holds the lock: tokens for that hold, and no mark of a rival waiter.
        reserved_first := n.fence + 1;
        reserved_last := n.fence + least(p_reserve::bigint, 9223372036854775807 - n.fence);
        UPDATE @schema@.names SET fence = reserved_last WHERE key = p_key;
        rivals := n.contended;
    ELSIF NOT n.contended THEN
        UPDATE @schema@.names SET contended = true WHERE key = p_key;
    END IF;
    IF p_waits AND p_kind IN ('fair', 'write') THEN
        INSERT INTO @schema@.marks VALUES (p_key,
                CASE p_kind WHEN 'fair' THEN 'fair' ELSE 'writer' END, p_owner, v_now,
                v_now + p_mark_ms * interval '1 ms')
            ON CONFLICT (key, what, owner) DO UPDATE SET lapses = excluded.lapses;
    END IF;
    IF reserved_first IS NULL THEN
        -- Busy, and no token handed out (see the top of this file).
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    SELECT min(expires) INTO lapse FROM @schema@.holds WHERE key = p_key;
    IF lapse IS NULL THEN
        -- Free, but another's turn in a fair line: until that waiter's mark lapses.
        SELECT min(lapses) INTO lapse FROM @schema@.marks WHERE key = p_key AND what = 'fair';
    END IF;
    ttl_ms := greatest(1, ceil(extract(epoch FROM coalesce(lapse, v_now) - v_now) * 1000))::bigint;
END $$;

-- Releases the acquisition `p_id` of `p_owner`'s hold `p_hold`; at its last, the hold ends and
-- the name's waiters are told, or, with `p_grant_owner`, the lock is granted to that waiting
-- owner of the same client as the hold `p_grant_hold` (its first acquisition's id too), with a
-- lease of `p_grant_lease_ms` and `p_grant_reserve` tokens reserved past its own, unless that
-- grant was withdrawn before it ran (see `undo`). Returns the acquisitions left (`remaining`,
-- from 1), 0 if the hold ended, -1 if the hold does not hold the name, -2 if this release was
-- applied already; for a grant, the granted hold's token, the last token reserved for it, and
-- whether a waiter found the name held since it was last freed (`rivals`).
CREATE OR REPLACE FUNCTION @schema@.release(p_key text, p_owner text, p_hold text, p_id text,
    p_election boolean, p_grant_owner text, p_grant_hold text, p_grant_lease_ms bigint,
    p_grant_reserve integer, OUT remaining integer, OUT token bigint,
    OUT reserved_last bigint, OUT rivals boolean)
LANGUAGE plpgsql AS $$
DECLARE
    n @schema@.names;
    h @schema@.holds;
    top bigint;
BEGIN
    n := @schema@.enter(p_key);
    IF p_grant_owner = '' AND NOT p_election THEN
        -- Frees, or changes nothing a crash must keep (see the top of this file). An election's
        -- stays synchronous: its observers must not see a term that ended lead again.
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    SELECT * INTO h FROM @schema@.holds WHERE key = p_key AND hold = p_hold AND owner = p_owner;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM @schema@.ended WHERE key = p_key AND id = p_id) THEN
            remaining := -2;
        ELSE
            remaining := -1;
        END IF;
        RETURN;
    END IF;
    IF NOT (p_id = ANY (h.acquisitions)) THEN
        remaining := -2;
        RETURN;
    END IF;
    IF cardinality(h.acquisitions) > 1 THEN
        UPDATE @schema@.holds SET acquisitions = array_remove(acquisitions, p_id)
            WHERE key = p_key AND hold = p_hold;
        remaining := cardinality(h.acquisitions) - 1;
        RETURN;
    END IF;
    DELETE FROM @schema@.holds WHERE key = p_key AND hold = p_hold;
    INSERT INTO @schema@.ended VALUES (p_key, p_id, 'released', clock_timestamp())
        ON CONFLICT (key, id) DO NOTHING;
    remaining := 0;
    IF p_grant_owner <> '' AND n.fence < 9223372036854775807
            AND NOT EXISTS (SELECT 1 FROM @schema@.ended WHERE key = p_key AND id = p_grant_hold)
            THEN
        token := n.fence + 1;
        top := token + least(greatest(p_grant_reserve, 0)::bigint, 9223372036854775807 - token);
        IF top > token THEN
            reserved_last := top;
        END IF;
        INSERT INTO @schema@.holds VALUES (p_key, p_grant_hold, p_grant_owner, 'lock', 1, token,
            clock_timestamp() + p_grant_lease_ms * interval '1 ms', ARRAY[p_grant_hold], NULL);
        UPDATE @schema@.names SET fence = top WHERE key = p_key;
        rivals := n.contended;
        RETURN;
    END IF;
    PERFORM @schema@.announce(p_key, n.contended, p_election);
END $$;

-- Claims the grant of the hold `p_hold` made to `p_owner`, whose answer its releaser did not
-- get, as the acquisition `p_claim`: the grant's first acquisition is renamed to it, so that the
-- grant's withdrawal (an `undo` of the hold's id), whichever of the two runs first, applies only
-- to a grant nobody claimed. Returns the hold's token if the grant stands and is claimed (again),
-- NULL if there is none to claim (withdrawn, never made, lapsed, or this claim undone).
CREATE OR REPLACE FUNCTION @schema@.claim(p_key text, p_owner text, p_hold text, p_claim text)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    h @schema@.holds;
BEGIN
    PERFORM @schema@.enter(p_key);
    SELECT * INTO h FROM @schema@.holds WHERE key = p_key AND hold = p_hold AND owner = p_owner;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF p_claim = ANY (h.acquisitions) THEN
        RETURN h.token;
    END IF;
    IF NOT (p_hold = ANY (h.acquisitions))
            OR EXISTS (SELECT 1 FROM @schema@.ended WHERE key = p_key AND id = p_claim) THEN
        RETURN NULL;
    END IF;
    UPDATE @schema@.holds SET acquisitions = array_replace(acquisitions, p_hold, p_claim)
        WHERE key = p_key AND hold = p_hold;
    RETURN h.token;
END $$;

-- Undoes the attempt `p_id` of `p_owner`, whose answer was lost (an acquisition, a grant's first
-- acquisition, a claim): released if it took or re-entered a hold, else recorded, so that it
-- takes nothing should it run later.
CREATE OR REPLACE FUNCTION @schema@.undo(p_key text, p_owner text, p_id text,
    p_election boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    h @schema@.holds;
BEGIN
    PERFORM @schema@.enter(p_key);
    SELECT * INTO h FROM @schema@.holds
        WHERE key = p_key AND owner = p_owner AND p_id = ANY (acquisitions);
    IF FOUND THEN
        PERFORM @schema@.release(p_key, p_owner, h.hold, p_id, p_election, '', '', 0, 0);
        -- An undoing is kept whatever the release it ran chose.
        PERFORM set_config('synchronous_commit', 'on', true);
    ELSE
        INSERT INTO @schema@.ended VALUES (p_key, p_id, 'undone', clock_timestamp())
            ON CONFLICT (key, id) DO NOTHING;
    END IF;
END $$;

-- Takes `p_owner`'s marks off the name: its wait ended without it.
CREATE OR REPLACE FUNCTION @schema@.withdraw(p_key text, p_owner text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    n @schema@.names;
BEGIN
    n := @schema@.enter(p_key);
    DELETE FROM @schema@.marks WHERE key = p_key AND owner = p_owner;
    IF FOUND THEN
        PERFORM @schema@.announce(p_key, n.contended, false);
    END IF;
END $$;

-- Renews the holds named by `p_keys` and `p_holds` (in pairs) to `p_leases_ms` from now, each if
-- it still holds; returns the indices (from 1) of those renewed. Takes no name's row lock: a
-- hold being taken over is either renewed first or found gone.
CREATE OR REPLACE FUNCTION @schema@.renew(p_keys text[], p_holds text[], p_leases_ms bigint[])
RETURNS SETOF integer
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    RETURN QUERY
    WITH wanted AS (
        SELECT * FROM unnest(p_keys, p_holds, p_leases_ms) WITH ORDINALITY AS w(key, hold, ms, i)
    ), renewed AS (
        UPDATE @schema@.holds h
            SET expires = greatest(h.expires, clock_timestamp() + w.ms * interval '1 ms')
            FROM wanted w
            WHERE h.key = w.key AND h.hold = w.hold AND h.expires > clock_timestamp()
            RETURNING w.i
    )
    SELECT i::integer FROM renewed;
END $$;

-- Ends every hold of the name, whoever holds it, and its marks; whether anything was held.
CREATE OR REPLACE FUNCTION @schema@.force_release(p_key text, p_election boolean)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    n @schema@.names;
    held boolean;
BEGIN
    n := @schema@.enter(p_key);
    DELETE FROM @schema@.marks WHERE key = p_key;
    DELETE FROM @schema@.holds WHERE key = p_key;
    held := FOUND;
    UPDATE @schema@.names SET family = NULL WHERE key = p_key;
    PERFORM @schema@.announce(p_key, true, false);
    RETURN held;
END $$;

-- Makes `p_permits` a semaphore's stored number of permits; the number stored before.
CREATE OR REPLACE FUNCTION @schema@.resize(p_key text, p_permits integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n @schema@.names;
BEGIN
    n := @schema@.enter(p_key);
    IF n.family IS NOT NULL AND n.family <> 'semaphore' THEN
        RAISE EXCEPTION 'the name is another primitive''s' USING ERRCODE = 'LS001',
            DETAIL = n.family;
    END IF;
    UPDATE @schema@.names SET permits = p_permits WHERE key = p_key;
    PERFORM @schema@.announce(p_key, n.contended, false);
    RETURN n.permits;
END $$;

-- An election's leader proclaims `p_value` beside its hold, if the hold still leads; whether it
-- did. Observers are told.
CREATE OR REPLACE FUNCTION @schema@.proclaim(p_key text, p_owner text, p_hold text,
    p_value text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM @schema@.enter(p_key);
    UPDATE @schema@.holds SET proclaimed = p_value
        WHERE key = p_key AND hold = p_hold AND owner = p_owner;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @schema@.announce(p_key, false, true);
    RETURN true;
END $$;

-- ---- Rate limiters ----

-- One row per rate limiter whose grants may still count: its stored limit ('window': `a` its
-- limit, `b` its window; 'cell': `a` its rate, `b` its period, `c` its burst), a cell rate's
-- theoretical arrival time (`tat`), the clock at its last grant (`last`), and when it lapses: its
-- last grant no longer counts, and a lapsed row is as good as none. Times are microseconds since
-- the epoch on the database's clock.
CREATE TABLE IF NOT EXISTS @schema@.limiters (
    key text PRIMARY KEY,
    mode text NOT NULL,
    a bigint NOT NULL,
    b bigint NOT NULL,
    c bigint NOT NULL,
    tat bigint NOT NULL DEFAULT 0,
    last bigint NOT NULL DEFAULT 0,
    lapses bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS limiters_lapses ON @schema@.limiters (lapses);

-- A window's grants: `n` made at `at`, kept while they count.
CREATE TABLE IF NOT EXISTS @schema@.grants (
    key text NOT NULL REFERENCES @schema@.limiters (key) ON DELETE CASCADE,
    at bigint NOT NULL,
    n bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS grants_key_at ON @schema@.grants (key, at);

-- The database's clock, in microseconds since the epoch.
CREATE OR REPLACE FUNCTION @schema@.micros() RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
$$;

-- The limiter `p_key`'s row, locked for the rest of the transaction (a lapsed placeholder made
-- if there is none), then the clock, never before the last call that wrote (`last`): the calls
-- on one limiter run one at a time, each reading the clock after the one before it committed,
-- and no grant is recorded before a time that a grant or a deletion was made at. A lapsed row
-- is as good as none (its tat read as 0); its grants are deleted by the next call that writes.
-- Limiters that lapsed a day ago are deleted with their grants, a few at a time.
CREATE OR REPLACE FUNCTION @schema@.limiter_enter(p_key text, p_mode text,
    OUT l @schema@.limiters, OUT v_now bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    LOOP
        SELECT * INTO l FROM @schema@.limiters WHERE key = p_key FOR UPDATE;
        EXIT WHEN FOUND;
        INSERT INTO @schema@.limiters (key, mode, a, b, c, lapses)
            VALUES (p_key, p_mode, 0, 0, 0, 0) ON CONFLICT DO NOTHING;
    END LOOP;
    v_now := greatest(@schema@.micros(), l.last);
    IF l.lapses <= v_now THEN
        l.tat := 0;
    END IF;
    DELETE FROM @schema@.limiters WHERE key IN (SELECT key FROM @schema@.limiters
        WHERE lapses < v_now - 86400000000 AND key <> p_key LIMIT 4 FOR UPDATE SKIP LOCKED);
END $$;

-- Takes `p_n` grants of the limiter `p_key` declaring the limit (`p_mode`, `p_a`, `p_b`, `p_c`,
-- as the table keeps one). Returns `outcome` 1 (granted at `at`, `available` left then), 0 (not
-- granted, nothing written: they could be had in `wait` microseconds at the earliest, and
-- `available` could be now) or 2 (the limiter stores another limit, `s_*`; nothing written).
CREATE OR REPLACE FUNCTION @schema@.limiter_take(p_key text, p_mode text, p_a bigint,
    p_b bigint, p_c bigint, p_n bigint, OUT outcome integer, OUT at bigint, OUT wait bigint,
    OUT available bigint, OUT s_mode text, OUT s_a bigint, OUT s_b bigint, OUT s_c bigint)
LANGUAGE plpgsql AS $$
DECLARE
    entered record;
    l @schema@.limiters;
    v_now bigint;
    v_stands boolean;
    v_used bigint;
    v_interval bigint;
    v_span bigint;
    v_tat bigint;
    v_after bigint;
BEGIN
    SELECT * INTO entered FROM @schema@.limiter_enter(p_key, p_mode);
    l := entered.l;
    v_now := entered.v_now;
    at := v_now;
    v_stands := l.lapses > v_now;
    IF v_stands AND (l.mode, l.a, l.b, l.c) IS DISTINCT FROM (p_mode, p_a, p_b, p_c) THEN
        outcome := 2;
        s_mode := l.mode; s_a := l.a; s_b := l.b; s_c := l.c;
        RETURN;
    END IF;
    IF p_mode = 'window' THEN
        IF v_stands THEN
            SELECT coalesce(sum(n), 0) INTO v_used FROM @schema@.grants
                WHERE key = p_key AND grants.at > v_now - p_b;
        ELSE
            v_used := 0;
        END IF;
        IF v_used + p_n > p_a THEN
            -- The grants must wait for this many of those in the window to leave it.
            SELECT g.at + p_b - v_now INTO wait FROM (SELECT grants.at, sum(n) OVER (ORDER BY
                grants.at) AS so_far FROM @schema@.grants WHERE key = p_key AND grants.at >
                v_now - p_b) g WHERE g.so_far >= v_used + p_n - p_a ORDER BY g.at LIMIT 1;
            outcome := 0;
            available := greatest(p_a - v_used, 0);
            RETURN;
        END IF;
        -- A lapsed limiter's grants all go; a standing one's, those out of the window.
        DELETE FROM @schema@.grants WHERE key = p_key
            AND (NOT v_stands OR grants.at <= v_now - p_b);
        INSERT INTO @schema@.grants (key, at, n) VALUES (p_key, v_now, p_n);
        UPDATE @schema@.limiters SET mode = p_mode, a = p_a, b = p_b, c = p_c, last = v_now,
            lapses = v_now + p_b WHERE key = p_key;
        outcome := 1;
        available := p_a - v_used - p_n;
        RETURN;
    END IF;
    -- A cell rate: each grant moves the arrival time on by the period over the rate (rounded
    -- up to whole microseconds); granted while it runs at most the burst's span ahead.
    v_interval := (p_b + p_a - 1) / p_a;
    v_span := p_c * v_interval;
    v_tat := greatest(l.tat, v_now);
    v_after := v_tat + p_n * v_interval;
    IF v_after - v_now > v_span THEN
        outcome := 0;
        wait := v_after - v_now - v_span;
        available := greatest((v_span - (v_tat - v_now)) / v_interval, 0);
        RETURN;
    END IF;
    IF NOT v_stands THEN
        DELETE FROM @schema@.grants WHERE key = p_key;
    END IF;
    UPDATE @schema@.limiters SET mode = p_mode, a = p_a, b = p_b, c = p_c, tat = v_after,
        last = v_now, lapses = v_after WHERE key = p_key;
    outcome := 1;
    available := (v_span - (v_after - v_now)) / v_interval;
END $$;

-- Reads the limiter `p_key`, writing nothing: what counts now by its stored limit (or by the
-- declared one, `p_mode`, `p_a`, `p_b`, `p_c`, if none is stored: `stored` false). `used` are the
-- grants that count now (a cell rate's cells ahead of the clock, rounded up), `next_wait` the
-- microseconds until one grant could be had (-1 if one can now).
CREATE OR REPLACE FUNCTION @schema@.limiter_look(p_key text, p_mode text, p_a bigint,
    p_b bigint, p_c bigint, OUT now bigint, OUT stored boolean, OUT mode text, OUT a bigint,
    OUT b bigint, OUT c bigint, OUT used bigint, OUT available bigint, OUT next_wait bigint)
LANGUAGE plpgsql AS $$
DECLARE
    l @schema@.limiters;
    v_interval bigint;
    v_ahead bigint;
BEGIN
    SELECT * INTO l FROM @schema@.limiters WHERE key = p_key;
    stored := FOUND;
    now := greatest(@schema@.micros(), coalesce(l.last, 0));
    stored := stored AND l.lapses > now;
    IF stored THEN
        mode := l.mode; a := l.a; b := l.b; c := l.c;
    ELSE
        mode := p_mode; a := p_a; b := p_b; c := p_c;
    END IF;
    next_wait := -1;
    IF mode = 'window' THEN
        IF stored THEN
            SELECT coalesce(sum(n), 0) INTO used FROM @schema@.grants
                WHERE key = p_key AND grants.at > now - b;
        ELSE
            used := 0;
        END IF;
        available := greatest(a - used, 0);
        IF available = 0 THEN
            SELECT g.at + b - now INTO next_wait FROM (SELECT grants.at, sum(n) OVER (ORDER BY
                grants.at) AS so_far FROM @schema@.grants WHERE key = p_key AND grants.at >
                now - b) g WHERE g.so_far >= used + 1 - a ORDER BY g.at LIMIT 1;
        END IF;
        RETURN;
    END IF;
    v_interval := (b + a - 1) / a;
    v_ahead := CASE WHEN stored THEN greatest(l.tat - now, 0) ELSE 0 END;
    used := (v_ahead + v_interval - 1) / v_interval;
    available := greatest((c * v_interval - v_ahead) / v_interval, 0);
    IF available = 0 THEN
        next_wait := v_ahead + v_interval - c * v_interval;
    END IF;
END $$;

-- Stores the limit (`p_mode`, `p_a`, `p_b`, `p_c`) as the limiter `p_key`'s, whatever was stored:
-- its grants so far count under it. Kept for a window (a period) from now, or until a cell
-- rate's arrival time if later. A limit of the other mode replaces one whose grants no longer
-- count; while they count it is refused (`refused`, nothing written). Returns the limit stored
-- before (`s_*`, NULL if none).
CREATE OR REPLACE FUNCTION @schema@.limiter_reconfigure(p_key text, p_mode text, p_a bigint,
    p_b bigint, p_c bigint, OUT refused boolean, OUT s_mode text, OUT s_a bigint,
    OUT s_b bigint, OUT s_c bigint)
LANGUAGE plpgsql AS $$
DECLARE
    entered record;
    l @schema@.limiters;
    v_now bigint;
    v_fresh boolean;
    v_counting boolean;
BEGIN
    SELECT * INTO entered FROM @schema@.limiter_enter(p_key, p_mode);
    l := entered.l;
    v_now := entered.v_now;
    refused := false;
    v_fresh := l.lapses <= v_now;
    IF NOT v_fresh THEN
        s_mode := l.mode; s_a := l.a; s_b := l.b; s_c := l.c;
        IF l.mode <> p_mode THEN
            IF l.mode = 'window' THEN
                v_counting := EXISTS (SELECT 1 FROM @schema@.grants WHERE key = p_key
                    AND grants.at > v_now - l.b);
            ELSE
                v_counting := l.tat > v_now;
            END IF;
            IF v_counting THEN
                refused := true;
                RETURN;
            END IF;
            v_fresh := true;
        END IF;
    END IF;
    IF v_fresh THEN
        -- Nothing of before counts.
        DELETE FROM @schema@.grants WHERE key = p_key;
        l.tat := 0;
    END IF;
    -- Every grant of the log was made by now; a cell rate's arrival time may be later.
    UPDATE @schema@.limiters SET mode = p_mode, a = p_a, b = p_b, c = p_c, tat = l.tat,
        last = v_now,
        lapses = greatest(v_now + p_b, CASE WHEN p_mode = 'cell' THEN l.tat ELSE 0 END)
        WHERE key = p_key;
END $$;

-- The version of these functions, which a client checks at its first use (made by the client).
-- @version@

-- Count-down latches: one row per latch, its count, the id of the round the count belongs to
-- (each setting from zero starts one), and when it lapses (the database's clock), reset at each
-- change. A lapsed latch reads as absent; its row is replaced by the next setting of its name,
-- or deleted by a setting of another.
CREATE TABLE IF NOT EXISTS @schema@.latches (
    key text PRIMARY KEY,
    count bigint NOT NULL CHECK (count >= 0),
    round text NOT NULL,
    expires timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS latches_expires ON @schema@.latches (expires);

-- Sets the latch `p_key`'s count to `p_count` as the round `p_round`, lapsing `p_expiry_ms` from
-- now, if it is at zero or absent (or lapsed); whether it did. Of two settings at once, one sets
-- and the other finds it set. Deletes a few lapsed latches of other names.
CREATE OR REPLACE FUNCTION @schema@.latch_set(p_key text, p_count bigint, p_round text,
    p_expiry_ms bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    l @schema@.latches;
    v_now timestamptz;
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    DELETE FROM @schema@.latches WHERE key IN (SELECT key FROM @schema@.latches
        WHERE expires <= clock_timestamp() AND key <> p_key LIMIT 16 FOR UPDATE SKIP LOCKED);
    LOOP
        SELECT * INTO l FROM @schema@.latches WHERE key = p_key FOR UPDATE;
        v_now := clock_timestamp();
        IF FOUND THEN
            IF l.expires > v_now AND l.count > 0 THEN
                RETURN false;
            END IF;
            UPDATE @schema@.latches SET count = p_count, round = p_round,
                expires = v_now + p_expiry_ms * interval '1 ms' WHERE key = p_key;
            RETURN true;
        END IF;
        INSERT INTO @schema@.latches VALUES (p_key, p_count, p_round,
                v_now + p_expiry_ms * interval '1 ms')
            ON CONFLICT (key) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        -- Another setting made it meanwhile: lock it, and look at it.
    END LOOP;
END $$;

-- Counts the latch `p_key` down once, if it is above zero: it lapses `p_expiry_ms` from now while
-- it counts, `p_kept_ms` once at zero, when its waiters are told. Returns the count left (0 once
-- at zero, or if the latch is absent or lapsed).
CREATE OR REPLACE FUNCTION @schema@.latch_down(p_key text, p_expiry_ms bigint, p_kept_ms bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    l @schema@.latches;
    v_now timestamptz;
BEGIN
    PERFORM set_config('synchronous_commit', 'on', true);
    SELECT * INTO l FROM @schema@.latches WHERE key = p_key FOR UPDATE;
    v_now := clock_timestamp();
    IF NOT FOUND OR l.expires <= v_now OR l.count = 0 THEN
        RETURN 0;
    END IF;
    UPDATE @schema@.latches SET count = count - 1, expires = v_now
            + CASE WHEN l.count = 1 THEN p_kept_ms ELSE p_expiry_ms END * interval '1 ms'
        WHERE key = p_key;
    IF l.count = 1 THEN
        PERFORM pg_notify(@channel@, p_key);
    END IF;
    RETURN l.count - 1;
END $$;

-- Raises LS004 unless `p_owner`'s hold `p_hold` holds the name `p_key` now. Takes the name's row
-- lock for the rest of the transaction: no other call on the name commits before the caller's
-- write that follows in the same transaction, so the hold is the name's latest when it commits.
CREATE OR REPLACE FUNCTION @schema@.held(p_key text, p_owner text, p_hold text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM @schema@.enter(p_key);
    IF NOT EXISTS (SELECT 1 FROM @schema@.holds WHERE key = p_key AND hold = p_hold
            AND owner = p_owner AND expires > clock_timestamp()) THEN
        RAISE EXCEPTION 'the hold no longer holds the name' USING ERRCODE = 'LS004';
    END IF;
END $$;
