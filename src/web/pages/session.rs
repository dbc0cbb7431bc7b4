//! The login, logout and first-run setup pages, and the session cookie they set.

use super::*;

#[derive(Template)]
#[template(path = "login.html")]
pub(super) struct LoginPage {
    pub(super) nav: bool,
    pub(super) csrf: String,
    pub(super) version: String,
    pub(super) error: Option<String>,
}

#[derive(Template)]
#[template(path = "setup.html")]
pub(super) struct SetupPage {
    pub(super) nav: bool,
    pub(super) csrf: String,
    pub(super) version: String,
    pub(super) error: Option<String>,
}

pub(super) async fn login_page(state: web::Data<AppState>) -> HttpResponse {
    if state.needs_setup() {
        return redirect("/setup");
    }
    ok(&LoginPage {
        nav: false,
        csrf: String::new(),
        version: version_string(),
        error: None,
    })
}

/// A new session's cookie: `HttpOnly`, `SameSite=Strict`, and `Secure` when `req` came over
/// HTTPS (the browser then never sends it over plain HTTP, the redirect listener's included).
pub(super) fn session_cookie(
    state: &AppState,
    req: &HttpRequest,
) -> Result<Cookie<'static>, crate::store::StoreError> {
    let token = auth::random_hex(32);
    let csrf = auth::random_hex(16);
    let hours = state.config.session_hours as i64;
    state.store.create_session(
        &crate::model::secrets::sha256_hex(&token),
        &csrf,
        hours * 3_600_000,
    )?;
    Ok(Cookie::build(auth::SESSION_COOKIE, token)
        .path("/")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(req.app_config().secure())
        .max_age(CookieDuration::hours(hours))
        .finish())
}

#[derive(Deserialize)]
pub(super) struct LoginForm {
    pub(super) password: String,
}

pub(super) async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: Form<LoginForm>,
) -> HttpResponse {
    let ip = client_ip(&req);
    let page = |status, e: String| {
        html(
            status,
            &LoginPage {
                nav: false,
                csrf: String::new(),
                version: version_string(),
                error: Some(e),
            },
        )
    };
    if let Err(wait) = state.limiter.check(ip) {
        return page(
            actix_web::http::StatusCode::TOO_MANY_REQUESTS,
            format!("Too many failed logins. Try again in {wait} s."),
        );
    }
    let Some(hash) = state.admin_hash() else {
        return redirect("/setup");
    };
    let Some(right) = auth::verify_password_limited(&hash, &form.password).await else {
        return page(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            "The board is busy checking other logins. Try again in a moment.".into(),
        );
    };
    if !right {
        state.limiter.fail(ip);
        crate::peer_warn!(ip, %ip, "failed login");
        return page(
            actix_web::http::StatusCode::UNAUTHORIZED,
            "Wrong password.".into(),
        );
    }
    state.limiter.success(ip);
    match session_cookie(&state, &req) {
        Ok(c) => HttpResponse::SeeOther()
            .cookie(c)
            .insert_header((header::LOCATION, "/"))
            .finish(),
        Err(e) => {
            tracing::warn!("login: cannot store the session: {e}");
            page(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                storage_message("the login session cannot be stored", &e),
            )
        }
    }
}

pub(super) async fn logout(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.check_csrf(form.csrf.as_deref())?;
    if let Auth::Session { token_hash, .. } = &auth {
        if let Err(e) = state.store.delete_sessions(Some(token_hash)) {
            // The attacker tryout: on a full disk the cookie was cleared while the session
            // stayed valid; say so and keep the cookie instead.
            tracing::warn!("cannot end a session at logout: {e}");
            return Ok(message(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                Some(&auth),
                "You are still signed in",
                &storage_message("the session was not ended", &e),
            ));
        }
    }
    let mut gone = Cookie::build(auth::SESSION_COOKIE, "").path("/").finish();
    gone.make_removal();
    Ok(HttpResponse::SeeOther()
        .cookie(gone)
        .insert_header((header::LOCATION, "/login"))
        .finish())
}

/// Log out everywhere: every web session (this one too) ends and every API token is
/// revoked.
pub(super) async fn logout_everywhere(
    auth: Auth,
    state: web::Data<AppState>,
    form: Form<CsrfForm>,
) -> Result<HttpResponse, AuthError> {
    auth.require_session(auth::CREDENTIALS_NEED_LOGIN)?;
    auth.check_csrf(form.csrf.as_deref())?;
    let (s, t) = state
        .store
        .revoke_all_credentials()
        .map_err(|e| AuthError::Internal(e.to_string()))?;
    tracing::info!(sessions = s, tokens = t, "logged out everywhere");
    let mut gone = Cookie::build(auth::SESSION_COOKIE, "").path("/").finish();
    gone.make_removal();
    Ok(HttpResponse::SeeOther()
        .cookie(gone)
        .insert_header((header::LOCATION, "/login"))
        .finish())
}

pub(super) async fn setup_page(state: web::Data<AppState>) -> HttpResponse {
    if !state.needs_setup() {
        return redirect("/login");
    }
    ok(&SetupPage {
        nav: false,
        csrf: String::new(),
        version: version_string(),
        error: None,
    })
}

#[derive(Deserialize)]
pub(super) struct SetupForm {
    pub(super) code: String,
    pub(super) password: String,
    pub(super) confirm: String,
}

pub(super) async fn setup(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: Form<SetupForm>,
) -> HttpResponse {
    if !state.needs_setup() {
        return message(
            actix_web::http::StatusCode::CONFLICT,
            None,
            "Already set up",
            "An admin password exists. Log in, and change it under Settings.",
        );
    }
    let ip = client_ip(&req);
    let err = |status, e: &str| {
        html(
            status,
            &SetupPage {
                nav: false,
                csrf: String::new(),
                version: version_string(),
                error: Some(e.into()),
            },
        )
    };
    if let Err(wait) = state.limiter.check(ip) {
        return err(
            actix_web::http::StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many wrong setup codes. Try again in {wait} s."),
        );
    }
    let code = state.setup_code().unwrap_or_default();
    if !crate::web::first_run::same_code(&form.code, &code) {
        state.limiter.fail(ip);
        return err(
            actix_web::http::StatusCode::UNAUTHORIZED,
            "Wrong setup code. It is on the board's login prompt and in the daemon's log.",
        );
    }
    if form.password.chars().count() < auth::MIN_PASSWORD {
        return err(
            actix_web::http::StatusCode::BAD_REQUEST,
            "The password must have at least 8 characters.",
        );
    }
    if form.password != form.confirm {
        return err(
            actix_web::http::StatusCode::BAD_REQUEST,
            "The two passwords differ.",
        );
    }
    let hash = match auth::hash_password(&form.password) {
        Ok(h) => h,
        Err(e) => return internal(e),
    };
    if let Err(e) = state.store.set_setting(auth::PASSWORD_KEY, &hash) {
        // Nothing changed: the setup code stays valid for another try.
        tracing::warn!("setup: cannot store the admin password: {e}");
        return err(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            &storage_message("the admin password cannot be stored", &e),
        );
    }
    if let Ok(mut g) = state.setup_code.lock() {
        *g = None;
    }
    crate::web::first_run::withdraw(&state.config);
    state.limiter.success(ip);
    tracing::info!("admin password set through the setup page");
    match session_cookie(&state, &req) {
        Ok(c) => HttpResponse::SeeOther()
            .cookie(c)
            .insert_header((header::LOCATION, "/"))
            .finish(),
        // The password is stored; only the session is not: say so, and log in later.
        Err(e) => {
            tracing::warn!("setup: cannot store the login session: {e}");
            message(
                actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
                None,
                "Password set",
                &format!(
                    "The admin password is set. {}",
                    storage_message("the login session cannot be stored", &e)
                ),
            )
        }
    }
}
