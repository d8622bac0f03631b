-- The tenant of the principal behind each record: reports shown to a tenant's tokens hold that tenant's records only.
ALTER TABLE retrievals ADD COLUMN tenant TEXT;
ALTER TABLE calls ADD COLUMN tenant TEXT;
-- Records written before tenants were kept are shown to operators only ('' is no tenant's name): a retrieval of a
-- principal with a tenant was labelled "user@tenant"; a call's label never said.
UPDATE retrievals SET tenant = '' WHERE principal LIKE '%@%';
UPDATE calls SET tenant = '' WHERE principal IS NOT NULL;
CREATE INDEX retrievals_tenant_at ON retrievals(tenant, at);
CREATE INDEX calls_tenant_at ON calls(tenant, at);
