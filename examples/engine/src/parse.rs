//! Query text to syntax tree (a Pratt parser).

use crate::data::COLUMNS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    Count,
    Sum,
    Min,
    Max,
    Avg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Col(u8),
    Lit(i64),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Neg(Box<Expr>),
    Abs(Box<Expr>),
    Min(Box<Expr>, Box<Expr>),
    Max(Box<Expr>, Box<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    Between(Box<Expr>, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub aggregate: Aggregate,
    pub value: Option<Expr>,
    pub filter: Option<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Number(i64),
    Symbol(&'static str),
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    const SYMBOLS: [&str; 15] = [
        "<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",", "=",
    ];
    let mut tokens = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    'outer: while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let n = text[start..i]
                .parse()
                .map_err(|_| format!("number too large at {start}"))?;
            tokens.push(Token::Number(n));
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            tokens.push(Token::Word(text[start..i].to_ascii_lowercase()));
        } else {
            for symbol in SYMBOLS {
                if text[i..].starts_with(symbol) {
                    tokens.push(Token::Symbol(symbol));
                    i += symbol.len();
                    continue 'outer;
                }
            }
            return Err(format!("unexpected character {c:?} at {i}"));
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    fn eat_word(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Token::Word(w)) if w == word) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, symbol: &str) -> Result<(), String> {
        match self.next() {
            Some(Token::Symbol(s)) if s == symbol => Ok(()),
            other => Err(format!("expected `{symbol}`, found {other:?}")),
        }
    }

    /// Binding power of the infix operator at the cursor.
    fn infix(&self) -> Option<(u8, &'static str)> {
        match self.peek()? {
            Token::Word(w) if w == "or" => Some((1, "or")),
            Token::Word(w) if w == "and" => Some((2, "and")),
            Token::Word(w) if w == "between" => Some((4, "between")),
            Token::Symbol(s) => match *s {
                "<" | "<=" | ">" | ">=" | "==" | "!=" | "=" => Some((4, s)),
                "+" | "-" => Some((5, s)),
                "*" | "/" | "%" => Some((6, s)),
                _ => None,
            },
            _ => None,
        }
    }

    fn expr(&mut self, min_power: u8) -> Result<Expr, String> {
        let mut left = self.prefix()?;
        while let Some((power, op)) = self.infix() {
            if power < min_power {
                break;
            }
            self.pos += 1;
            left = if op == "between" {
                let low = self.expr(5)?;
                if !self.eat_word("and") {
                    return Err("expected `and` in `between`".into());
                }
                let high = self.expr(5)?;
                Expr::Between(Box::new(left), Box::new(low), Box::new(high))
            } else {
                let right = self.expr(power + 1)?;
                let (l, r) = (Box::new(left), Box::new(right));
                match op {
                    "or" => Expr::Or(l, r),
                    "and" => Expr::And(l, r),
                    _ => Expr::Bin(
                        match op {
                            "<" => BinOp::Lt,
                            "<=" => BinOp::Le,
                            ">" => BinOp::Gt,
                            ">=" => BinOp::Ge,
                            "==" | "=" => BinOp::Eq,
                            "!=" => BinOp::Ne,
                            "+" => BinOp::Add,
                            "-" => BinOp::Sub,
                            "*" => BinOp::Mul,
                            "/" => BinOp::Div,
                            _ => BinOp::Rem,
                        },
                        l,
                        r,
                    ),
                }
            };
        }
        Ok(left)
    }

    fn call_args(&mut self, n: usize) -> Result<Vec<Expr>, String> {
        self.expect("(")?;
        let mut args = Vec::new();
        for i in 0..n {
            if i > 0 {
                self.expect(",")?;
            }
            args.push(self.expr(0)?);
        }
        self.expect(")")?;
        Ok(args)
    }

    fn prefix(&mut self) -> Result<Expr, String> {
        match self.next() {
            Some(Token::Number(n)) => Ok(Expr::Lit(n)),
            Some(Token::Symbol("-")) => Ok(Expr::Neg(Box::new(self.expr(7)?))),
            Some(Token::Symbol("(")) => {
                let inner = self.expr(0)?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(Token::Word(w)) => match w.as_str() {
                "not" => Ok(Expr::Not(Box::new(self.expr(3)?))),
                "abs" => {
                    let mut a = self.call_args(1)?;
                    Ok(Expr::Abs(Box::new(a.remove(0))))
                }
                "min" | "max" => {
                    let mut a = self.call_args(2)?;
                    let (x, y) = (Box::new(a.remove(0)), Box::new(a.remove(0)));
                    Ok(if w == "min" {
                        Expr::Min(x, y)
                    } else {
                        Expr::Max(x, y)
                    })
                }
                "if" => {
                    let mut a = self.call_args(3)?;
                    let (c, x, y) = (a.remove(0), a.remove(0), a.remove(0));
                    Ok(Expr::If(Box::new(c), Box::new(x), Box::new(y)))
                }
                column if column.starts_with('c') => {
                    let index: usize = column[1..]
                        .parse()
                        .map_err(|_| format!("unknown name `{column}`"))?;
                    if index >= COLUMNS {
                        return Err(format!("no column `{column}` (c0..c{})", COLUMNS - 1));
                    }
                    Ok(Expr::Col(index as u8))
                }
                other => Err(format!("unknown name `{other}`")),
            },
            other => Err(format!("unexpected {other:?}")),
        }
    }
}

pub fn parse_query(text: &str) -> Result<Query, String> {
    let mut parser = Parser {
        tokens: tokenize(text)?,
        pos: 0,
    };
    let aggregate = match parser.next() {
        Some(Token::Word(w)) => match w.as_str() {
            "count" => Aggregate::Count,
            "sum" => Aggregate::Sum,
            "min" => Aggregate::Min,
            "max" => Aggregate::Max,
            "avg" => Aggregate::Avg,
            other => return Err(format!("unknown aggregate `{other}`")),
        },
        other => return Err(format!("expected an aggregate, found {other:?}")),
    };
    let value = if aggregate == Aggregate::Count {
        None
    } else {
        parser.expect("(")?;
        let value = parser.expr(0)?;
        parser.expect(")")?;
        Some(value)
    };
    let filter = if parser.eat_word("where") {
        Some(parser.expr(0)?)
    } else {
        None
    };
    if let Some(token) = parser.peek() {
        return Err(format!("unexpected {token:?} after the query"));
    }
    Ok(Query {
        aggregate,
        value,
        filter,
    })
}
