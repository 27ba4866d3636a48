//! One request: its Host header and token checked, then the page or an
//! API reply (kept replies at once, others made on a worker thread).

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::conns::{Conn, Conns};
use crate::Error;
use crate::api::{self, Query};
use crate::session::Session;

/// What every request is checked against and answered from.
pub struct App {
    session: Arc<Session>,
    token: String,
    hosts: [String; 2],
    page: Bytes,
}

impl App {
    /// The server of `session` on `port`, its URL carrying `token`.
    pub fn new(session: Arc<Session>, token: String, port: u16, page: String) -> App {
        App {
            session,
            token,
            hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            page: page.into(),
        }
    }
}

/// The service of one connection: each request marks it busy while
/// answered.
pub fn service(
    app: Arc<App>,
    conns: Arc<Conns>,
    conn: Arc<Conn>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<Full<Bytes>>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send,
> + Send {
    hyper::service::service_fn(move |req| {
        let app = app.clone();
        let busy = conns.busy(&conn);
        async move {
            let r = respond(app, req).await;
            drop(busy);
            Ok(r)
        }
    })
}

fn reply(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

fn text(status: StatusCode, msg: &str) -> Response<Full<Bytes>> {
    reply(
        status,
        "text/plain; charset=utf-8",
        Bytes::from(format!("{msg}\n")),
    )
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Why a request is refused before its path is looked at, if it is.
fn refusal(app: &App, req: &Request<Incoming>, q: &Query) -> Option<Response<Full<Bytes>>> {
    // RFC 9112, 3.2: exactly one Host header, else 400.
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let (Some(host), None) = (hosts.next(), hosts.next()) else {
        return Some(text(
            StatusCode::BAD_REQUEST,
            "bad request: a request needs exactly one Host header",
        ));
    };
    let allowed = |h: &str| app.hosts.iter().any(|a| a == h);
    // A request target in absolute form names the host too.
    let authority = req.uri().authority().map(|a| a.as_str());
    if !host.to_str().is_ok_and(allowed) || authority.is_some_and(|a| !allowed(a)) {
        return Some(text(StatusCode::FORBIDDEN, "forbidden: wrong Host"));
    }
    if !q.get("t").is_some_and(|t| same(t, &app.token)) {
        return Some(text(
            StatusCode::FORBIDDEN,
            "forbidden: the URL's token is missing or wrong",
        ));
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: only GET and HEAD",
        );
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Some(r);
    }
    if !req.body().is_end_stream() {
        // Nothing here takes a body: refused unread, and the connection
        // closed rather than read to its end.
        let mut r = text(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload too large: requests have no body",
        );
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return Some(r);
    }
    None
}

/// Marks a reply made on a worker as no longer wanted when the request is
/// dropped (its client gone) before the worker starts on it.
struct Wanted(Arc<AtomicBool>);

impl Drop for Wanted {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

async fn respond(app: Arc<App>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let q: Query = form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .into_owned()
        .collect();
    if let Some(r) = refusal(&app, &req, &q) {
        return r;
    }
    let path = req.uri().path();
    if path == "/" {
        return reply(StatusCode::OK, "text/html; charset=utf-8", app.page.clone());
    }
    let Some(api_path) = path.strip_prefix("/api/") else {
        return text(StatusCode::NOT_FOUND, "not found");
    };
    if let Some(a) = api::cached(&app.session, api_path, &q) {
        return reply(StatusCode::OK, a.content_type, a.body);
    }
    let api_path = api_path.to_owned();
    let wanted = Arc::new(AtomicBool::new(true));
    let _wanted = Wanted(wanted.clone());
    let session = app.session.clone();
    // Analyses may take a while: off the thread that reads requests.
    let result = tokio::task::spawn_blocking(move || {
        wanted
            .load(Ordering::Relaxed)
            .then(|| api::answer(&session, &api_path, &q))
    })
    .await;
    match result {
        Ok(Some(Ok(a))) => reply(StatusCode::OK, a.content_type, a.body),
        Ok(Some(Err(e))) => {
            let status = match e {
                Error::NotFound(_) => StatusCode::NOT_FOUND,
                Error::BadRequest(_) => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            text(status, &e.to_string())
        }
        Ok(None) | Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
    }
}
