//! The server of `tally serve`: on 127.0.0.1 only, every request checked
//! for the secret token of the printed URL (`?t=`) and for a Host header
//! naming the loopback address and port (so a page of another site, whose
//! name was rebound to 127.0.0.1, is refused). `/` is the page, `/api/*`
//! the JSON API; anything else is 404.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::Response;

use crate::session::Session;
use crate::{Error, api};

/// A listening socket and the token its URL carries.
pub struct Bound {
    listener: TcpListener,
    token: String,
    port: u16,
}

/// Listens on 127.0.0.1 (never another address), on `port` or one the
/// system chooses, with a new random token.
pub fn bind(port: Option<u16>) -> Result<Bound, Error> {
    let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port.unwrap_or(0))))?;
    let port = listener.local_addr()?.port();
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Io(std::io::Error::other(format!("no random token: {e}"))))?;
    let token = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(Bound {
        listener,
        token,
        port,
    })
}

struct App {
    session: Arc<Session>,
    token: String,
    hosts: [String; 2],
    page: String,
}

impl Bound {
    /// The URL to open: `http://127.0.0.1:PORT/?t=TOKEN`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/?t={}", self.port, self.token)
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves `session` until the process ends (shared: the caller may
    /// go on preparing views in another thread).
    pub fn serve(self, session: Arc<Session>) -> Result<(), Error> {
        let title = format!("tally — {}", session.inputs[session.main()].name);
        let app = Arc::new(App {
            session,
            token: self.token,
            hosts: [
                format!("127.0.0.1:{}", self.port),
                format!("localhost:{}", self.port),
            ],
            page: crate::page(&title, "null"),
        });
        let router = Router::new().fallback(handle).with_state(app);
        self.listener.set_nonblocking(true)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()?;
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(self.listener)?;
            axum::serve(listener, router).await
        })?;
        Ok(())
    }
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Body>) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-store")
        .header("X-Content-Type-Options", "nosniff")
        .header("Referrer-Policy", "no-referrer")
        .body(body.into())
        .unwrap_or_default()
}

fn text(status: StatusCode, msg: &str) -> Response {
    reply(status, "text/plain; charset=utf-8", format!("{msg}\n"))
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

async fn handle(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !app.hosts.iter().any(|h| h == host) {
        return text(StatusCode::FORBIDDEN, "forbidden: wrong Host");
    }
    if !q.get("t").is_some_and(|t| same(t, &app.token)) {
        return text(
            StatusCode::FORBIDDEN,
            "forbidden: the URL's token is missing or wrong",
        );
    }
    let path = uri.path();
    if path == "/" {
        return reply(StatusCode::OK, "text/html; charset=utf-8", app.page.clone());
    }
    let Some(api_path) = path.strip_prefix("/api/") else {
        return text(StatusCode::NOT_FOUND, "not found");
    };
    let api_path = api_path.to_owned();
    let app2 = app.clone();
    // Analyses may take a while: off the thread that accepts requests.
    let result =
        tokio::task::spawn_blocking(move || api::handle(&app2.session, &api_path, &q)).await;
    match result {
        Ok(Ok(r)) => reply(StatusCode::OK, r.content_type, r.body),
        Ok(Err(e)) => {
            let status = match e {
                Error::NotFound(_) => StatusCode::NOT_FOUND,
                Error::BadRequest(_) => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            text(status, &e.to_string())
        }
        Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}
