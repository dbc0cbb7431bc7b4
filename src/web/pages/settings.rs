//! The Settings page: the password, API tokens, and the sections other modules add
//! (retention, HTTPS).

use super::*;

pub(super) struct TokenView {
    pub(super) id: i64,
    pub(super) name: String,
    pub(super) created: String,
    /// read-only / run tests / admin.
    pub(super) scope: &'static str,
}

#[derive(Template)]
#[template(path = "settings.html")]
pub(crate) struct SettingsPage {
    pub(super) nav: bool,
    pub(super) csrf: String,
    pub(super) version: String,
    pub(super) message: Option<String>,
    pub(super) error: Option<String>,
    pub(super) new_token: Option<String>,
    pub(super) tokens: Vec<TokenView>,
    /// History retention in force, one line of text.
    pub(super) retention: String,
    /// The caps in force, for the form: runs kept and MiB.
    pub(super) max_runs: u64,
    pub(super) max_mib: u64,
    /// HTTPS in force: the certificate's fingerprint and pin, or the plain-HTTP warning.
    pub(super) tls: crate::web::tls::Shown,
    /// The scheme of this board's web UI in curl examples: `https` or `http`.
    pub(super) scheme: &'static str,
}

pub(crate) fn settings(
    state: &AppState,
    auth: &Auth,
    message: Option<String>,
    error: Option<String>,
    new_token: Option<String>,
) -> SettingsPage {
    SettingsPage {
        nav: true,
        csrf: auth.csrf().into(),
        version: version_string(),
        message,
        error,
        new_token,
        tokens: state
            .store
            .tokens()
            .unwrap_or_default()
            .into_iter()
            .map(|t| TokenView {
                id: t.id,
                name: t.name,
                created: fmt_time(t.created_at),
                scope: auth::Scope::parse(&t.scope).label(),
            })
            .collect(),
        max_runs: state.store.retention().max_runs,
        max_mib: state.store.retention().max_bytes >> 20,
        tls: state.tls.clone(),
        scheme: if state.config.tls_in_force() {
            "https"
        } else {
            "http"
        },
        retention: {
            let r = state.store.retention();
            format!(
                "At most {} runs and {} MiB of history ({} MiB in use). Imported runs are deleted first, then the oldest of whichever source is over its fair share (own runs 2 parts, scheduled and anonymous runs 1 part each); pinned, running and hand-started suite runs are kept. Anonymous services (payload, sink, source) record at most {} runs per peer a minute, the rest counted in one folded run.",
                r.max_runs,
                r.max_bytes >> 20,
                state.store.used_bytes().unwrap_or(0) >> 20,
                crate::runs::anon::RUNS_PER_MINUTE
            )
        },
    }
}

pub(super) async fn settings_page(auth: Auth, state: web::Data<AppState>) -> HttpResponse {
    ok(&settings(&state, &auth, None, None, None))
}

#[derive(Deserialize)]
pub(super) struct PasswordForm {
    #[serde(default)]
    pub(super) csrf: Option<String>,
    pub(super) current: String,
    pub(super) password: String,
    pub(super) confirm: String,
}

pub(super) async fn change_password(
    req: HttpRequest,
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<PasswordForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let ip = client_ip(&req);
    let bad = |e: &str| {
        html(
            actix_web::http::StatusCode::BAD_REQUEST,
            &settings(&state, &auth, None, Some(e.into()), None),
        )
    };
    if state.limiter.check(ip).is_err() {
        return Ok(bad("Too many wrong passwords. Try again later."));
    }
    let Some(hash) = state.admin_hash() else {
        return Ok(bad("No password is set."));
    };
    let Some(right) = auth::verify_password_limited(&hash, &form.current).await else {
        return Ok(bad(
            "The board is busy checking passwords. Try again in a moment.",
        ));
    };
    if !right {
        state.limiter.fail(ip);
        return Ok(bad("The current password is wrong. Nothing was changed."));
    }
    if form.password.chars().count() < auth::MIN_PASSWORD {
        return Ok(bad(
            "The new password must have at least 8 characters. Nothing was changed.",
        ));
    }
    if form.password != form.confirm {
        return Ok(bad("The two new passwords differ. Nothing was changed."));
    }
    let h = auth::hash_password(&form.password).map_err(AuthError::Internal)?;
    state
        .store
        .set_setting(auth::PASSWORD_KEY, &h)
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    // Whoever knew the old password is out: every session and API token ends; this browser
    // gets a new session.
    let (s, t) = state
        .store
        .revoke_all_credentials()
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    tracing::info!(
        sessions = s,
        tokens = t,
        "password changed: sessions ended, tokens revoked"
    );
    let cookie = session_cookie(&state, &req).map_err(|e| AuthError::Internal(e.to_string()))?;
    let csrf = state
        .store
        .session(&crate::model::secrets::sha256_hex(cookie.value()))
        .ok()
        .flatten()
        .map(|r| r.csrf)
        .unwrap_or_default();
    let me = Auth::Session {
        token_hash: crate::model::secrets::sha256_hex(cookie.value()),
        csrf,
    };
    let msg = format!(
        "Password changed. Every other session was logged out and all {t} API tokens were revoked (make new ones below)."
    );
    let mut resp = ok(&settings(&state, &me, Some(msg), None, None));
    let _ = resp.add_cookie(&cookie);
    Ok(resp)
}

#[derive(Deserialize)]
pub(super) struct TokenForm {
    #[serde(default)]
    pub(super) csrf: Option<String>,
    pub(super) name: String,
    /// read / run / admin (default read: the least a token may do).
    #[serde(default)]
    pub(super) scope: Option<String>,
}

pub(super) async fn create_token(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<TokenForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let name = form.name.trim();
    if name.is_empty() || name.chars().count() > 64 {
        return Ok(html(
            actix_web::http::StatusCode::BAD_REQUEST,
            &settings(
                &state,
                &auth,
                None,
                Some("A token name has 1 to 64 characters.".into()),
                None,
            ),
        ));
    }
    let scope = match form.scope.as_deref().unwrap_or("read") {
        w @ ("read" | "run" | "admin") => auth::Scope::parse(w),
        _ => {
            return Ok(html(
                actix_web::http::StatusCode::BAD_REQUEST,
                &settings(
                    &state,
                    &auth,
                    None,
                    Some("A token's scope is read, run or admin.".into()),
                    None,
                ),
            ))
        }
    };
    let token = auth::random_hex(24);
    state
        .store
        .create_token(
            name,
            &crate::model::secrets::sha256_hex(&token),
            scope.as_str(),
        )
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    Ok(ok(&settings(&state, &auth, None, None, Some(token))))
}

pub(super) async fn delete_token(
    auth: Auth,
    state: web::Data<AppState>,
    path: web::Path<i64>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let id = path.into_inner();
    if let Err(e) = state.store.delete_token(id) {
        // The attacker tryout: on a full disk this answered as if the token were revoked
        // while it still worked.
        tracing::warn!(token = id, "cannot revoke an API token: {e}");
        return Ok(message(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            Some(&auth),
            "The token was not revoked",
            &storage_message("the token still works", &e),
        ));
    }
    Ok(redirect("/settings"))
}
