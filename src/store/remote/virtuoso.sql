-- Set-up of a Virtuoso 7 database for the service's `virtuoso` dialect.
-- Applied by `npm run virtuoso` at every start (idempotent); {{USER}} is the service's user.

GRANT SPARQL_SELECT TO "{{USER}}";
GRANT SPARQL_UPDATE TO "{{USER}}";
-- Anonymous SPARQL sees no graph; the service's user reads and writes all.
DB.DBA.RDF_DEFAULT_USER_PERMS_SET ('nobody', 0);
DB.DBA.RDF_DEFAULT_USER_PERMS_SET ('{{USER}}', 3);

-- The service's endpoint: SPARQL 1.1 Protocol behind HTTP Basic auth of SQL users.
DB.DBA.VHOST_REMOVE (lhost=>'*ini*', vhost=>'*ini*', lpath=>'/wsm/sparql');
DB.DBA.VHOST_DEFINE (lhost=>'*ini*', vhost=>'*ini*', lpath=>'/wsm/sparql', ppath=>'/!sparql/', is_dav=>1,
  vsp_user=>'dba', auth_fn=>'DB.DBA.HP_AUTH_SQL_USER', realm=>'wsm', sec=>'basic', ses_vars=>0, opts=>vector('noinherit', 1));

-- Conditional write (QuadStore.writeIf): in ONE transaction, runs the ASK
-- queries of `cond` (separated by `sep`) and, only when each answers as bit
-- i of `expect` says (1 true, 0 false; condition i is bit i), the ops as
-- WSM_APPLY does. Answers the number of ops applied, or -1 when a condition
-- did not hold (nothing applied). An empty `cond` always holds.
-- Under serializable isolation (DefaultIsolation = 8) the rows the ASKs read
-- stay locked until the commit, so a concurrent transaction that would
-- change an answer waits or is rolled back as a deadlock (and sent again
-- by the client, which then sees the new state).
create procedure DB.DBA.WSM_APPLY_IF (in cond varchar, in expect integer, in sep varchar, in body varchar)
{
  declare pos, n, answer, bit integer;
  declare st, msg, op, one varchar;
  declare meta, rows any;
  declare exit handler for sqlstate '*' { rollback work; resignal; };
  log_enable (1, 1);
  -- Text beyond ASCII reaches the procedure as a wide string, which exec()
  -- would narrow to '?': it is recoded to UTF-8, which exec() reads as such.
  if (__tag (cond) = __tag of nvarchar) cond := charset_recode (cond, '_WIDE_', 'UTF-8');
  if (__tag (body) = __tag of nvarchar) body := charset_recode (body, '_WIDE_', 'UTF-8');
  bit := 1;
  while (length (cond) > 0)
    {
      pos := strstr (cond, sep);
      if (pos is null) { one := cond; cond := ''; }
      else { one := subseq (cond, 0, pos); cond := subseq (cond, pos + length (sep)); }
      st := '00000';
      exec (concat ('SPARQL ', one), st, msg, vector (), 1, meta, rows);
      if (st <> '00000')
        {
          rollback work;
          signal ('WSM02', sprintf ('condition refused: %s', msg));
        }
      answer := 0;
      if (length (rows) > 0 and rows[0][0] is not null and rows[0][0] <> 0) answer := 1;
      if (answer <> mod (expect / bit, 2))
        {
          commit work;
          return -1;
        }
      bit := bit * 2;
    }
  n := 0;
  while (length (body) > 0)
    {
      pos := strstr (body, sep);
      if (pos is null) { op := body; body := ''; }
      else { op := subseq (body, 0, pos); body := subseq (body, pos + length (sep)); }
      st := '00000';
      exec (concat ('SPARQL ', op), st, msg);
      if (st <> '00000')
        {
          rollback work;
          signal ('WSM01', sprintf ('op %d refused: %s', n, msg));
        }
      n := n + 1;
    }
  commit work;
  return n;
};
GRANT EXECUTE ON DB.DBA.WSM_APPLY_IF TO "{{USER}}";

-- All-or-nothing multi-operation update: the ops, separated by `sep`, run in
-- one transaction; the first refusal rolls every op back and signals WSM01.
-- Called from SPARQL as SELECT (<sql:WSM_APPLY>(sep, body) AS ?n) {}.
create procedure DB.DBA.WSM_APPLY (in sep varchar, in body varchar)
{
  return DB.DBA.WSM_APPLY_IF ('', 1, sep, body);
};
GRANT EXECUTE ON DB.DBA.WSM_APPLY TO "{{USER}}";

-- The version of these procedures. The service refuses to start on an engine
-- whose procedures are older than it needs (SparqlStore.checkProcedures):
-- `npm run virtuoso` re-applies this file, to a running engine too.
-- 2: text beyond ASCII arrives as UTF-8 (WSM_APPLY_IF recodes it); version 1
-- (no such procedure) narrowed it to '?'.
create procedure DB.DBA.WSM_PROCEDURES_VERSION ()
{
  return 2;
};
GRANT EXECUTE ON DB.DBA.WSM_PROCEDURES_VERSION TO "{{USER}}";
