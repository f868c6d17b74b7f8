//! A loopback TCP proxy whose open connections a test can cut, to make a client's socket drop
//! the way a network does, while new connections are still accepted (at once, or after the
//! network has been down a while).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

pub struct CutProxy {
    addr: SocketAddr,
    cuts: watch::Sender<u64>,
    /// Until when new connections wait before they are forwarded.
    down_until: watch::Sender<Option<Instant>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    /// Forwards every connection made to it to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let cuts = watch::Sender::new(0);
        let down_until = watch::Sender::new(None);
        let watching = cuts.clone();
        let outage = down_until.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut cut = watching.subscribe();
                let back_at = *outage.borrow();
                tokio::spawn(async move {
                    if let Some(back_at) = back_at {
                        tokio::time::sleep_until(back_at).await;
                    }
                    let Ok(mut server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = server.set_nodelay(true);
                    let _ = client.set_nodelay(true);
                    // Dropping both streams on a cut closes them without any goodbye.
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self {
            addr,
            cuts,
            down_until,
            accepting,
        }
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection open now.
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Drops every connection open now, and holds the connections made in the next `outage`
    /// until it is over (a network down for a while).
    pub fn cut_for(&self, outage: Duration) {
        self.down_until.send_replace(Some(Instant::now() + outage));
        self.cut();
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}
