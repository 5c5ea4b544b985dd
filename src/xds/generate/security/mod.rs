//! The HTTP and network filters that enforce security policy on a proxy's server side:
//! AuthorizationPolicy as RBAC (ALLOW, DENY, AUDIT) and ext_authz (CUSTOM), RequestAuthentication
//! as jwt_authn. ztunnel's policies are in `ztunnel`.

pub mod authz;
pub mod extauthz;
pub mod jwt;
pub mod rbac;
pub mod rules;
