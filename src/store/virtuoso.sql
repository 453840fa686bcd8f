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

-- All-or-nothing multi-operation update: the ops, separated by `sep`, run in
-- one transaction; the first refusal rolls every op back and signals WSM01.
-- Called from SPARQL as SELECT (<sql:WSM_APPLY>(sep, body) AS ?n) {}.
create procedure DB.DBA.WSM_APPLY (in sep varchar, in body varchar)
{
  declare pos, n integer;
  declare st, msg, op varchar;
  declare exit handler for sqlstate '*' { rollback work; resignal; };
  log_enable (1, 1);
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
GRANT EXECUTE ON DB.DBA.WSM_APPLY TO "{{USER}}";
